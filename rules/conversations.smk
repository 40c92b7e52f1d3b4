# Conversations of imported targets (`kora import-conversations`) are source files: this
# rule makes those of the targets it calls only. A continued target's conversations are
# made from its recordings (`kora continue`), any other's from the cell's scenarios.
rule conversations:
    input:
        unpack(PIPELINE.rule_input("conversations")),
    output:
        shards=directory(PIPELINE.rule_output("conversations")),
    log:
        PIPELINE.rule_log("conversations"),
    wildcard_constraints:
        target=PIPELINE.called_targets(),
    conda:
        "../envs/kora.yaml"
    params:
        **PIPELINE.rule_params("conversations"),
    script:
        "../scripts/conversations.py"
