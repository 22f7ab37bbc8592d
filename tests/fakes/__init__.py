"""Stand-ins for what tests cannot have here: a fake streaming server, NVML, powermetrics, a synthetic run."""
