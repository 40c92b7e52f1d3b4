# KORA child-safety benchmark: taxonomy shards -> seeds -> scenarios -> conversations
# -> judgments -> results.json. A shard is a (risk, age range, motivation) cell's file; each
# stage has one job per risk (and target) that makes that risk's shards (kora.run.workflow.risk_jobs).

from snakemake.utils import min_version

# the oldest Snakemake this workflow is tested with (pyproject.toml: snakemake>=8.20)
min_version("8.20")


include: "rules/common.smk"
include: "rules/seeds.smk"
include: "rules/scenarios.smk"
include: "rules/conversations.smk"
include: "rules/judgments.smk"
include: "rules/results.smk"
include: "rules/report.smk"


# rules that only gather what the shards hold and draw it, calling no model: under a
# cluster executor they run on the submitting machine, not as jobs of their own
localrules:
    all,
    results,
    report,
    leaderboard,


rule all:
    default_target: True
    input:
        lambda wc: [
            f
            for f in PIPELINE.results_files() + PIPELINE.report_files()
            if not REPORTING() or os.path.exists(f)
        ],
