# Reports: a self-contained report.html and summary.json per target, and a leaderboard
# across targets. Not part of `all`: ask for them by name, e.g.
#   snakemake --cores 4 results/gpt-target/report.html results/leaderboard.html


rule report:
    input:
        judgments=get_target_judgments,
        results="results/{target}/results.json",
    output:
        html="results/{target}/report.html",
        summary="results/{target}/summary.json",
    log:
        "logs/report/{target}.log",
    conda:
        "../envs/kora.yaml"
    script:
        "../scripts/report.py"


rule leaderboard:
    input:
        results=PLAN.results_files(),
        # the paired comparisons need each target's per-test grades
        judgments=[
            judgments_path(t, s) for t in PLAN.config.targets for s in PLAN.shards()
        ],
    output:
        html="results/leaderboard.html",
        json="results/leaderboard.json",
    log:
        "logs/report/leaderboard.log",
    conda:
        "../envs/kora.yaml"
    params:
        targets=list(PLAN.config.targets),
    script:
        "../scripts/leaderboard.py"
