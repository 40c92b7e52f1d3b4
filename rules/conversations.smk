rule conversations:
    input:
        scenarios="data/scenarios/{risk}/{age}/{motivation}.jsonl",
        prompts=PLAN.templates("conversations"),
        taxonomy=PLAN.taxonomy_files(),
    output:
        data="results/{target}/conversations/{risk}/{age}/{motivation}.jsonl",
        status="results/{target}/conversations/{risk}/{age}/{motivation}.status.json",
    log:
        "logs/conversations/{target}/{risk}/{age}/{motivation}.log",
    conda:
        "../envs/kora.yaml"
    params:
        target=lambda wc: PLAN.model_params(PLAN.config.targets[wc.target].model),
        prompts=lambda wc: PLAN.config.target_prompts(wc.target),
        user_model=PLAN.model_params(PLAN.config.user_model),
        retry=retry_param(
            "results/{target}/conversations/{risk}/{age}/{motivation}.jsonl"
        ),
    script:
        "../scripts/conversations.py"
