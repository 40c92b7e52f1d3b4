# Imported scenarios (`kora import-scenarios`) are source files: no rule makes them, so
# Snakemake never re-runs (or deletes) one; `kora import-scenarios --remove` switches back.
if not PIPELINE.imported:

    rule scenarios:
        input:
            unpack(PIPELINE.rule_input("scenarios")),
        output:
            shards=directory(PIPELINE.rule_output("scenarios")),
        log:
            PIPELINE.rule_log("scenarios"),
        conda:
            "../envs/kora.yaml"
        params:
            **PIPELINE.rule_params("scenarios"),
        script:
            "../scripts/scenarios.py"
