rule judgments:
    input:
        conversations="results/{target}/conversations/{risk}/{age}/{motivation}.jsonl",
        prompts=PIPELINE.templates("judgments"),
        taxonomy=PIPELINE.taxonomy_files(),
    output:
        data="results/{target}/judgments/{risk}/{age}/{motivation}.jsonl",
        status="results/{target}/judgments/{risk}/{age}/{motivation}.status.json",
    log:
        "logs/judgments/{target}/{risk}/{age}/{motivation}.log",
    conda:
        "../envs/kora.yaml"
    params:
        cell=cell,
        target=lambda wc: wc.target,
        judges=PIPELINE.judges_params(),
        retry=retry_param("results/{target}/judgments/{risk}/{age}/{motivation}.jsonl"),
    script:
        "../scripts/judgments.py"
