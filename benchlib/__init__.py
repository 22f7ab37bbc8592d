"""Frontier Bench: benchmarks of open-weight multimodal LLMs as they are deployed."""

__version__ = "0.1.0"
