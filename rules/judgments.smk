rule judgments:
    input:
        unpack(PIPELINE.rule_input("judgments")),
    output:
        shards=directory(PIPELINE.rule_output("judgments")),
    log:
        PIPELINE.rule_log("judgments"),
    conda:
        "../envs/kora.yaml"
    params:
        **PIPELINE.rule_params("judgments"),
    script:
        "../scripts/judgments.py"
