"""Strata's benchmark suite: `make bench` runs it and writes bench/RESULTS.md."""
