rule results:
    input:
        unpack(get_results_input),
    output:
        results="results/{target}/results.json",
        usage="results/{target}/usage.json",
    log:
        "logs/results/{target}.log",
    conda:
        "../envs/kora.yaml"
    params:
        # what results.json reports about the run: a change re-writes it even when no
        # shard changed (e.g. a role renamed)
        judges=PLAN.config.judges,
        user=PLAN.config.user_model,
        models=lambda wc: PLAN.models_used(wc.target),
        prompts=lambda wc: PLAN.config.target_prompts(wc.target),
        # renewed when a shard is missing: Snakemake then rebuilds it (see kora.shards)
        retry=lambda wc: missing_token(
            f"results/{wc.target}/results.json", PLAN.results_input_files(wc.target)
        ),
    script:
        "../scripts/results.py"
