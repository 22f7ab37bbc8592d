"""What the sized plans (quality_looks, latency_looks) ask of the runner's Session. The runner imports them to run
its suite, so they cannot import the runner back; they are typed against this Protocol, which Session meets
(tests/suites/test_session_api.py checks the two stay alike)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, ContextManager, Protocol

import pandas as pd

from benchlib.config.params import BenchParams
from benchlib.config.tasks import Task, Variant
from benchlib.measure.client.backends import ChatRequest
from benchlib.measure.client.transcription import TranscriptionRequest
from benchlib.measure.telemetry import WindowKind
from benchlib.records.rows import RequestRecord


class SuiteSession(Protocol):
    """A suite's live context, as far as code that plans and sends more of the suite's requests needs it."""

    params: BenchParams
    suite: str
    out_dir: Path
    run_id: str

    def window(self, name: str, kind: WindowKind = "task") -> ContextManager[None]: ...

    def base_record(self, task: str, variant: str, repeat: int, concurrency: int = 1, warmup: bool = False,
                    modality: str = "text", extra_key: str = "") -> RequestRecord: ...

    def build(self, task: Task, variant: Variant, record: RequestRecord) -> ChatRequest | TranscriptionRequest: ...

    # planned: runner.Planned items, which this module cannot name without importing the runner
    def execute(self, planned: list[Any], concurrency: int = 1, progress: Any = None,
                offsets: list[float] | None = None) -> list[RequestRecord]: ...

    def run_requests(self) -> pd.DataFrame: ...
