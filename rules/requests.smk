# A file asked under a target the config lacks, or under another benchmark version's
# results folder: Snakemake alone would say it has no rule for it. These rules' input
# functions stop the run before any job, naming what is wrong.


rule unknown_target:
    input:
        lambda wc: stop_misdirected(PIPELINE.layout.target_file(wc.unknown, wc.file)),
    output:
        PIPELINE.layout.target_file("{unknown}"),
    log:
        PIPELINE.layout.log("requests", "{unknown}", "{file}"),
    wildcard_constraints:
        unknown=misdirected.unknown_targets(PIPELINE),
        file=r"results\.json|usage\.json|report\.html|summary\.json",
    conda:
        "../envs/kora.yaml"
    shell:
        "false"


for _other in misdirected.other_results_dirs(PIPELINE):

    rule:
        name:
            f"other_version_{_other.replace('-', '_')}"
        input:
            lambda wc, root=_other: stop_misdirected(
                PIPELINE.layout.anywhere(root).format(path=wc.path)
            ),
        output:
            PIPELINE.layout.anywhere(_other),
        log:
            PIPELINE.layout.log("requests", _other, "{path}"),
        wildcard_constraints:
            path=".+",
        conda:
            "../envs/kora.yaml"
        shell:
            "false"
