"""How a job runs: its models, its shards' files and body, its progress and stops, the gathering jobs."""
