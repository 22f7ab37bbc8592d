"""The scoring layer: how an answer is scored (checkers) after the model's echo of its prompt is cut (echo).

May import: config, records.
"""
