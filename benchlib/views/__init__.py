"""The views layer: what the suite notebooks and the explorer show — suite tables and figures
(suite_report), the evidence beside the numbers (evidence), the telemetry timeline, the load figures and the
request explorer.

May import: config, records, measure, scoring, analysis, published, suites.
"""
