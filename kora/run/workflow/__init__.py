"""What the Snakefile asks of the package: the run's config and shards, each rule's inputs, the files it can make, Snakemake's internals."""
