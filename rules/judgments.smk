rule judgments:
    input:
        conversations="results/{target}/conversations/{risk}/{age}/{motivation}.jsonl",
        prompts=PLAN.templates("judgments"),
        taxonomy=PLAN.taxonomy_files(),
    output:
        data="results/{target}/judgments/{risk}/{age}/{motivation}.jsonl",
        status="results/{target}/judgments/{risk}/{age}/{motivation}.status.json",
    params:
        judges=[PLAN.model_params(j) for j in PLAN.config.judges],
        retry=get_retry,
    log:
        "logs/judgments/{target}/{risk}/{age}/{motivation}.log",
    script:
        "../scripts/judgments.py"
