rule judgments:
    input:
        conversations=PIPELINE.layout.conversations(),
        prompts=PIPELINE.templates("judgments"),
        taxonomy=PIPELINE.taxonomy_files(),
    output:
        data=PIPELINE.layout.judgments(),
        status=status_of(PIPELINE.layout.judgments()),
    log:
        PIPELINE.layout.log("judgments", TARGET, CELL),
    conda:
        "../envs/kora.yaml"
    params:
        benchmark=PIPELINE.benchmark.name,
        cell=cell,
        target=lambda wc: wc.target,
        judges=PIPELINE.judges_params(),
        retry=retry_param(PIPELINE.layout.judgments()),
    script:
        "../scripts/judgments.py"
