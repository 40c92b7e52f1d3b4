# Conversations of imported targets (`kora import-conversations`) are source files: this
# rule makes those of the targets it calls only.
rule conversations:
    input:
        # the cell's scenarios, or a continued target's recordings (`kora continue`)
        unpack(PIPELINE.conversations_sources),
        prompts=PIPELINE.templates("conversations"),
        taxonomy=PIPELINE.taxonomy_files(),
    output:
        data=PIPELINE.layout.conversations(),
        status=status_of(PIPELINE.layout.conversations()),
    log:
        PIPELINE.layout.log("conversations", TARGET, CELL),
    wildcard_constraints:
        target=PIPELINE.called_targets(),
    conda:
        "../envs/kora.yaml"
    params:
        benchmark=PIPELINE.benchmark.name,
        cell=cell,
        target=lambda wc: wc.target,
        target_model=lambda wc: PIPELINE.target_model_params(wc.target),
        prompts=lambda wc: PIPELINE.config.target_prompts(wc.target),
        user_model=PIPELINE.role_params("user_model"),
        # generated, or which imported file: switching re-runs the conversations
        scenarios=lambda wc: PIPELINE.conversation_source(wc.target),
        retry=retry_param(PIPELINE.layout.conversations()),
    script:
        "../scripts/conversations.py"
