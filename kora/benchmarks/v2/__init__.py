"""KORA v2 (korabench/benchmark), the `benchmark: v2` choice: what differs from v1."""
