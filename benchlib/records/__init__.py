"""The records layer: how results are kept — typed CSV columns (schema), one tidy row per request appended
durably (rows), a suite's run folder with its one reader and the one walk of an outputs tree (run_folder), the
results store at any fsspec URL (store), secrets kept out of all of them (secrets), the one
plausibility rule rows are held to (plausible), and files from outside read within bounds (outside).

May import: config.
"""
