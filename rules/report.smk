# Reports: a self-contained report.html and summary.json per target, and a leaderboard
# across targets; `rule all` asks for them, or ask by name, e.g.
#   snakemake --cores 4 results/gpt-target/report.html results/leaderboard.html

from kora.benchmarks.layout import REPORT


rule report:
    input:
        unpack(lambda wc: gather_inputs.report_inputs(PIPELINE, wc.target)),
    output:
        html=report(
            PIPELINE.layout.report_html(),
            category="Results",
            subcategory="{target}",
            labels={"target": "{target}", "file": REPORT},
        ),
        summary=PIPELINE.layout.summary_json(),
    log:
        PIPELINE.layout.log("report", "{target}"),
    conda:
        "../envs/kora.yaml"
    # one job at a time that reads a target's every test (profiles/default)
    resources:
        whole_target_jobs=1,
    params:
        target=lambda wc: wc.target,
        places=PIPELINE.places,
    script:
        "../scripts/report.py"


rule leaderboard:
    input:
        results=PIPELINE.results_files(),
        # how each result was made: the page says first where they differ
        manifests=[PIPELINE.layout.manifest_json(t) for t in PIPELINE.config.targets],
        # what each target's calls cost a test, beside its rates
        usage=[PIPELINE.layout.usage_json(t) for t in PIPELINE.config.targets],
        # the paired comparisons need each target's per-test grades
        judgments=[
            f
            for files in gather_inputs.leaderboard_judgments(PIPELINE).values()
            for f in files
        ],
        taxonomy=PIPELINE.taxonomy_files(),
        # people's grades, where any: the ranking by corrected rates
        annotations=[
            f
            for files in gather_inputs.leaderboard_annotations(PIPELINE).values()
            for f in files
        ],
    output:
        html=report(
            PIPELINE.layout.leaderboard_html(),
            category="Leaderboard",
            labels={"file": "leaderboard.html"},
        ),
        data=report(
            PIPELINE.layout.leaderboard_json(),
            category="Leaderboard",
            labels={"file": "leaderboard.json"},
        ),
    log:
        PIPELINE.layout.log("report", "leaderboard"),
    conda:
        "../envs/kora.yaml"
    params:
        judgments=gather_inputs.leaderboard_judgments(PIPELINE),
        places=PIPELINE.places,
        annotations=gather_inputs.leaderboard_annotations(PIPELINE),
    script:
        "../scripts/leaderboard.py"
