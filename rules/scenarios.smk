# Imported scenarios (`kora import-scenarios`) are source files: no rule makes them, so
# Snakemake never re-runs (or deletes) one; `kora import-scenarios --remove` switches back.
if not PIPELINE.imported:

    rule scenarios:
        input:
            seeds="data/seeds/{risk}/{age}/{motivation}.jsonl",
            prompts=PIPELINE.templates("scenarios"),
            taxonomy=PIPELINE.taxonomy_files(),
        output:
            data="data/scenarios/{risk}/{age}/{motivation}.jsonl",
            rejected="data/scenarios/{risk}/{age}/{motivation}.rejected.jsonl",
            status="data/scenarios/{risk}/{age}/{motivation}.status.json",
        log:
            "logs/scenarios/{risk}/{age}/{motivation}.log",
        conda:
            "../envs/kora.yaml"
        params:
            cell=cell,
            expand_model=PIPELINE.role_params("expand_model"),
            user_model=PIPELINE.role_params("user_model"),
            retry=retry_param("data/scenarios/{risk}/{age}/{motivation}.jsonl"),
        script:
            "../scripts/scenarios.py"
