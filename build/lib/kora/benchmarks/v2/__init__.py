"""Pieces of KORA v2 (korabench/benchmark), the current canonical benchmark, for the
`benchmark: v2` choice the project is growing towards (see the v2 issue); v1 does not
use them."""
