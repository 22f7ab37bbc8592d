"""Interchange with other tools: their result files read as our rows (readers: AIPerf, GuideLLM and vLLM's bench
serve benchmark), an import written as a run folder of ours (import_run), and a finished run folder exported
as llm-d's Benchmark Report v0.2 (llmd_export). It measures nothing and runs nothing.

May import: config, records, measure, scoring, analysis.
"""
