"""The run's broker: the one process that runs a local run's jobs, and its look-ahead (the calls it makes before the jobs that need them)."""
