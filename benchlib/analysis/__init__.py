"""The analysis layer: from rows to figures with their n and intervals — per-suite summaries (summary),
statistics (stats), cross-checks, paired verdicts on the same items (paired), the deployment frontier (frontier),
roofline and bandwidth law, load levels, the threshold decisions.

May import: config, records, measure, scoring.
"""
