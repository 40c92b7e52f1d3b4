rule seeds:
    input:
        prompts=PIPELINE.templates("seeds"),
        taxonomy=PIPELINE.taxonomy_files(),
    output:
        data=PIPELINE.layout.seeds(),
        status=status_of(PIPELINE.layout.seeds()),
    log:
        PIPELINE.layout.log("seeds", CELL),
    conda:
        "../envs/kora.yaml"
    # a version that plans its seeds (KORA v2 with total_seeds) adds `orders`: the
    # cell's planned seed calls
    params:
        **PIPELINE.seeds_plan_params(),
        benchmark=PIPELINE.benchmark.name,
        cell=cell,
        model=PIPELINE.role_params("seed_model"),
        seeds_per_task=PIPELINE.config.grid.seeds_per_task,
        retry=retry_param(PIPELINE.layout.seeds()),
    script:
        "../scripts/seeds.py"
