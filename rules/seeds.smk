rule seeds:
    input:
        prompts=PIPELINE.templates("seeds"),
        taxonomy=PIPELINE.taxonomy_files(),
    output:
        data="data/seeds/{risk}/{age}/{motivation}.jsonl",
        status="data/seeds/{risk}/{age}/{motivation}.status.json",
    log:
        "logs/seeds/{risk}/{age}/{motivation}.log",
    conda:
        "../envs/kora.yaml"
    # KORA v2 with total_seeds adds `orders`: the cell's planned seed calls
    params:
        **PIPELINE.seeds_plan_params(),
        cell=cell,
        model=PIPELINE.role_params("seed_model"),
        seeds_per_task=PIPELINE.config.grid.seeds_per_task,
        retry=retry_param("data/seeds/{risk}/{age}/{motivation}.jsonl"),
    script:
        "../scripts/seeds.py"
