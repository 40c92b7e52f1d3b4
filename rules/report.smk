# Reports: a self-contained report.html and summary.json per target, and a leaderboard
# across targets; `rule all` asks for them, or ask by name, e.g.
#   snakemake --cores 4 results/gpt-target/report.html results/leaderboard.html


rule report:
    input:
        judgments=lambda wc: PIPELINE.judgment_files(wc.target),
        results="results/{target}/results.json",
        taxonomy=PIPELINE.taxonomy_files(),
        # `kora agreement`'s figures, once people have graded (kora annotate)
        agreement=lambda wc: PIPELINE.agreement_files(wc.target),
    output:
        html="results/{target}/report.html",
        summary="results/{target}/summary.json",
    log:
        "logs/report/{target}.log",
    conda:
        "../envs/kora.yaml"
    params:
        target=lambda wc: wc.target,
    script:
        "../scripts/report.py"


rule leaderboard:
    input:
        results=PIPELINE.results_files(),
        # the paired comparisons need each target's per-test grades
        judgments=[
            f for files in PIPELINE.leaderboard_judgments().values() for f in files
        ],
        taxonomy=PIPELINE.taxonomy_files(),
    output:
        html="results/leaderboard.html",
        data="results/leaderboard.json",
    log:
        "logs/report/leaderboard.log",
    conda:
        "../envs/kora.yaml"
    params:
        judgments=PIPELINE.leaderboard_judgments(),
    script:
        "../scripts/leaderboard.py"
