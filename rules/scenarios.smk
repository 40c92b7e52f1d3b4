# Imported scenarios (`kora import-scenarios`) are source files: no rule makes them, so
# Snakemake never re-runs (or deletes) one; `kora import-scenarios --remove` switches back.
if not PIPELINE.imported:

    rule scenarios:
        input:
            seeds=PIPELINE.layout.seeds(),
            prompts=PIPELINE.templates("scenarios"),
            taxonomy=PIPELINE.taxonomy_files(),
        output:
            data=PIPELINE.layout.scenarios(),
            rejected=rejected_of(PIPELINE.layout.scenarios()),
            status=status_of(PIPELINE.layout.scenarios()),
        log:
            PIPELINE.layout.log("scenarios", CELL),
        conda:
            "../envs/kora.yaml"
        params:
            benchmark=PIPELINE.benchmark.name,
            cell=cell,
            expand_model=PIPELINE.role_params("expand_model"),
            user_model=PIPELINE.role_params("user_model"),
            retry=retry_param(PIPELINE.layout.scenarios()),
        script:
            "../scripts/scenarios.py"
