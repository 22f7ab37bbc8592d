"""What a level sends: workload shapes (workload), prompts fitted to a token length with the server's own
tokenizer (prompt_fitting), recorded traces (traces: Mooncake JSONL) and the workers that send them
(workers).

Rooms of measure/ it may import: pacing, http, client, selfcheck.
"""
