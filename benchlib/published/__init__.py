"""The published layer: the seeds — the paper and field reports in ../shared/seeds/ that this package
reproduces — as tidy reference rows (reference), checked against their printed tables (transcription),
their own arithmetic recomputed (arithmetic) and their tables rebuilt (rebuilt).

May import: config, records, measure, scoring, analysis.
"""
