rule results:
    input:
        judgments=get_target_judgments,
        status=get_target_status,
        rejected=get_target_rejected,
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
