"""Which server this is and what it does: the servers this tool starts itself (llama_cpp, llama_server, vllm,
whisper, whisper_app; launchers maps each engine that benchlib.config.servers' profiles name to its class), the
pre-flight that asks a user's server what it serves and how it takes overlapping requests (preflight), and the
server's own Prometheus metrics (prometheus).

Rooms of measure/ it may import: pacing, http, client, models.
"""
