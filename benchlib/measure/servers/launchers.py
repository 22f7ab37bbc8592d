"""The class that starts each embedded engine: benchlib.config.servers declares which profile this tool starts
itself and under which `engine` name (params server.embedded.engine); this maps that name to the code."""

from __future__ import annotations

from benchlib.config.params import EmbeddedParams
from benchlib.measure.servers.llama_cpp import EmbeddedServer
from benchlib.measure.servers.llama_server import LlamaServer
from benchlib.measure.servers.vllm import VllmServer
from benchlib.measure.servers.whisper import WhisperServer

LAUNCHERS: dict[str, type[EmbeddedServer]] = {
    "llama.cpp": EmbeddedServer,  # llama-cpp-python's server
    "llama-server": LlamaServer,
    "vllm": VllmServer,
    "whisper": WhisperServer,
}


def launcher(settings: EmbeddedParams) -> type[EmbeddedServer]:
    """The class that starts `settings.engine` (params validate the name against the profiles' engines)."""
    return LAUNCHERS[settings.engine]
