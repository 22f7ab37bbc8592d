"""The suites layer: running things — one suite of a params file (runner), the load sweeps (load/), the
quantization ladder (ladder) and studies of several deployments.

May import: config, records, measure, scoring, analysis, published.
"""
