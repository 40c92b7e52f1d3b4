rule seeds:
    input:
        prompts=PLAN.templates("seeds"),
        taxonomy=PLAN.taxonomy_files(),
    output:
        data="data/seeds/{risk}/{age}/{motivation}.jsonl",
        status="data/seeds/{risk}/{age}/{motivation}.status.json",
    params:
        model=PLAN.model_params(PLAN.config.seed_model),
        seeds_per_task=PLAN.config.grid.seeds_per_task,
        retry=get_retry,
    log:
        "logs/seeds/{risk}/{age}/{motivation}.log",
    script:
        "../scripts/seeds.py"
