"""What operators see of a running Strata: log lines, metrics, traces."""
