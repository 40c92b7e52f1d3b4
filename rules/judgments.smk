rule judgments:
    input:
        conversations="results/{target}/conversations/{risk}/{age}/{motivation}.jsonl",
        prompts=PLAN.templates("judgments"),
        taxonomy=PLAN.taxonomy_files(),
    output:
        data="results/{target}/judgments/{risk}/{age}/{motivation}.jsonl",
        status="results/{target}/judgments/{risk}/{age}/{motivation}.status.json",
    log:
        "logs/judgments/{target}/{risk}/{age}/{motivation}.log",
    conda:
        "../envs/kora.yaml"
    params:
        judges=[PLAN.model_params(j) for j in PLAN.config.judges],
        retry=retry_param("results/{target}/judgments/{risk}/{age}/{motivation}.jsonl"),
    script:
        "../scripts/judgments.py"
