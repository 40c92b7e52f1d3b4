rule conversations:
    input:
        unpack(get_conversations_input),
    output:
        data="results/{target}/conversations/{risk}/{age}/{motivation}.jsonl",
        status="results/{target}/conversations/{risk}/{age}/{motivation}.status.json",
    log:
        "logs/conversations/{target}/{risk}/{age}/{motivation}.log",
    conda:
        "../envs/kora.yaml"
    params:
        target=lambda wc: PLAN.target_params(wc.target),
        prompts=lambda wc: PLAN.config.target_prompts(wc.target),
        user_model=PLAN.model_params(PLAN.config.user_model),
        # generated, or which imported file: switching re-runs the conversations
        scenarios=PLAN.scenario_source(),
        retry=retry_param(
            "results/{target}/conversations/{risk}/{age}/{motivation}.jsonl"
        ),
    script:
        "../scripts/conversations.py"
