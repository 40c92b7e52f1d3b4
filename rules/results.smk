rule results:
    input:
        # the shards' .status.json and .rejected.jsonl come from the same jobs as these
        # files; the script finds them beside them (fewer inputs: a faster DAG)
        judgments=get_target_judgments,
    output:
        results="results/{target}/results.json",
        usage="results/{target}/usage.json",
    log:
        "logs/results/{target}.log",
    conda:
        "../envs/kora.yaml"
    params:
        judges=PLAN.config.judges,
        user=PLAN.config.user_model,
    script:
        "../scripts/results.py"
