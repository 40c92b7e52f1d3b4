from kora.benchmarks.layout import MANIFEST, RESULTS
from kora.config.public import public_config


rule results:
    input:
        unpack(lambda wc: gather_inputs.results_inputs(PIPELINE, wc.target)),
    output:
        results=report(
            PIPELINE.layout.results_json(),
            category="Results",
            subcategory="{target}",
            labels={"target": "{target}", "file": RESULTS},
        ),
        usage=PIPELINE.layout.usage_json(),
        # what the result was made of and by (docs/results-format.md)
        manifest=report(
            PIPELINE.layout.manifest_json(),
            category="Provenance",
            subcategory="{target}",
            labels={"target": "{target}", "file": MANIFEST},
        ),
        # one row per test, for DuckDB, pandas or Hugging Face datasets
        table=PIPELINE.layout.conversations_parquet(),
    log:
        PIPELINE.layout.log("results", "{target}"),
    conda:
        "../envs/kora.yaml"
    # one job at a time that reads a target's every test (profiles/default)
    resources:
        whole_target_jobs=1,
    params:
        # each cell's place in the risks' folders of the input
        places=PIPELINE.places,
        # what results.json reports about the run: a change re-writes it even when no
        # shard changed (e.g. a role renamed)
        meta=lambda wc: gather_inputs.results_meta(PIPELINE, wc.target),
        # the result's config as its manifest carries it (credentials masked)
        config=lambda wc: public_config(PIPELINE.config, wc.target),
        # renewed when a folder is missing: Snakemake then rebuilds it (see kora.run.jobs.shards)
        retry=lambda wc: missing_token(
            PIPELINE.layout.results_json(wc.target),
            [
                f
                for files in gather_inputs.results_inputs(PIPELINE, wc.target).values()
                for f in files
            ],
        ),
    script:
        "../scripts/results.py"
