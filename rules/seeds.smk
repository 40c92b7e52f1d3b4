rule seeds:
    input:
        unpack(PIPELINE.rule_input("seeds")),
    output:
        shards=directory(PIPELINE.rule_output("seeds")),
    log:
        PIPELINE.rule_log("seeds"),
    conda:
        "../envs/kora.yaml"
    params:
        **PIPELINE.rule_params("seeds"),
    script:
        "../scripts/seeds.py"
