"""The scoring layer: how an answer is scored (checkers; graded sets' scorers and code: graded, run in the sandbox)
after inline thinking is left out and the final answer read (answers) and the model's echo of its prompt is cut
(echo); what a checker reads and says (verdict).

May import: config, records.
"""
