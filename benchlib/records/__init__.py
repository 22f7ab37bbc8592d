"""The records layer: how results are kept — typed CSV columns (schema), one tidy row per request appended
durably (rows), the results store at any fsspec URL (store), and secrets kept out of all of them (secrets).

May import: config.
"""
