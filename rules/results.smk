rule results:
    input:
        unpack(lambda wc: PIPELINE.results_inputs(wc.target)),
    output:
        results=PIPELINE.layout.results_json(),
        usage=PIPELINE.layout.usage_json(),
    log:
        PIPELINE.layout.log("results", "{target}"),
    conda:
        "../envs/kora.yaml"
    params:
        # what results.json reports about the run: a change re-writes it even when no
        # shard changed (e.g. a role renamed)
        meta=lambda wc: PIPELINE.results_meta(wc.target),
        # renewed when a shard is missing: Snakemake then rebuilds it (see kora.run.shards)
        retry=lambda wc: missing_token(
            PIPELINE.layout.results_json(wc.target),
            PIPELINE.results_input_files(wc.target),
        ),
    script:
        "../scripts/results.py"
