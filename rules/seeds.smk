rule seeds:
    input:
        prompts=PLAN.templates("seeds"),
        taxonomy=PLAN.taxonomy_files(),
    output:
        data="data/seeds/{risk}/{age}/{motivation}.jsonl",
        status="data/seeds/{risk}/{age}/{motivation}.status.json",
    log:
        "logs/seeds/{risk}/{age}/{motivation}.log",
    conda:
        "../envs/kora.yaml"
    params:
        model=PLAN.model_params(PLAN.config.seed_model),
        seeds_per_task=PLAN.config.grid.seeds_per_task,
        retry=retry_param("data/seeds/{risk}/{age}/{motivation}.jsonl"),
    script:
        "../scripts/seeds.py"
