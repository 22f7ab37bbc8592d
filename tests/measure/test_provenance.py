"""manifest.json: provenance from the server's own endpoints, host/GPU facts, and never a secret.

Fake-server tests cover the documented shapes (Ollama /api/version, /api/tags, /api/show, /api/ps; llama.cpp
/props; see measure/test_backends.py for the references); integration/test_provenance_embedded.py reads the real
embedded server.
"""

from __future__ import annotations

import json
import sys
import time
from types import SimpleNamespace

import gguf
import numpy as np
import pytest

from benchlib.measure import provenance
from benchlib.measure.capacity import bandwidth
from benchlib.records import secrets
from tests.fakes.fake_nvml import NVML_ERROR_DRIVER_NOT_LOADED, FakeGpu, FakeNvml
from tests.fakes.servers import FAKE_DIGEST
from tests.helpers import make_params, send

SECRET = "sk-fb-test-7Qz3XkV9pLm2Rr8T"  # distinctive: if it shows up anywhere, it leaked


def test_ollama_model_version_digest_quantization_and_vram_before_after(fake_server):
    params = make_params(fake_server.url, {"tokens": 2}, kind="ollama")
    fake_server.loaded.clear()
    before = provenance.server_state(params)
    send(params)  # loads the model (keep_alive 30m keeps it)
    data = provenance.build_manifest(params, "run1", "text", time.time() - 5, server_before=before, nvml=FakeNvml())
    server = data["server"]
    assert server["version"] == "fake-1.0" and server["kind"] == "ollama"
    model = server["model"]
    assert model["id"] == "fake-model" and model["found"] and model["digest"] == FAKE_DIGEST
    assert model["quantization"] == "Q4_K_M" and model["parameter_size"] == "268.10M"
    assert model["context_length_trained"] == 32768 and model["capabilities"] == ["completion"]
    assert server["state_before"]["model"] == {"loaded": False}
    after = server["state_after"]["model"]
    assert after["loaded"] and after["size_vram_gb"] == 0.291 and after["vram_share"] == 1.0
    assert after["context_length"] == 8192
    text = json.dumps(data)
    assert "fake license text" not in text and "Modelfile generated" not in text  # long fields left out
    assert "errors" not in server


def test_llamacpp_server_version_from_props(fake_server):
    params = make_params(f"{fake_server.url}/v1", server={"software": "llama.cpp"})
    server = provenance.server_info(params)
    assert server["version"] == "b6000-fake0000"
    assert server["model"]["id"] == "fake-model" and server["model"]["found"]
    assert server["model"]["path"] == "/models/fake-model-Q4_K_M.gguf" and server["model"]["context_length"] == 4096
    # the file is on the server's machine, not this one: its name says Q4_K_M, but a name is not read as a fact
    assert server["model"]["quantization"] is None and "quantization_source" not in server["model"]
    assert server["model"]["quantization_unknown"] == "/models/fake-model-Q4_K_M.gguf: no regular file on this machine"
    props = server["endpoints"]["/props"]
    assert "chat_template" not in props and len(props["chat_template_sha256"]) == 64
    assert server["endpoints"]["/health"] == {"status": "ok"}


def gguf_file(path, file_type):
    writer = gguf.GGUFWriter(str(path), "llama")
    if file_type is not None:
        writer.add_file_type(int(file_type))
    writer.add_tensor("output_norm.weight", np.ones(8, dtype=np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


@pytest.mark.parametrize("file_type, expected", [(gguf.LlamaFileType.MOSTLY_Q4_1, "q4_1"),
                                                 (gguf.LlamaFileType.MOSTLY_Q4_K_M, "q4_k_m"),
                                                 (gguf.LlamaFileType.MOSTLY_F16, "f16")])
def test_a_user_servers_quantization_is_read_from_the_served_ggufs_header(tmp_path, file_type, expected):
    # named as another quantization: the header, not the name, says what the file holds
    path = gguf_file(tmp_path / "model-Q8_0.gguf", file_type)
    params = make_params("http://127.0.0.1:9/v1", server={"software": "llama-cpp-python", "model_id": str(path)})
    model = {"id": str(path), "found": True, "quantization": None}  # a llama-cpp-python server lists the GGUF's path
    model.update(provenance._served_weights(params, model))
    assert model["weights_source"] == "reported by the server" and model["path"] == str(path)
    assert model["quantization"] == expected and model["quantization_source"] == f"gguf header ({file_type.name})"
    assert "quantization_unknown" not in model and "quantization_declared" not in model


def test_a_declared_quantization_the_header_contradicts_is_kept_beside_it(tmp_path):
    path = gguf_file(tmp_path / "model.gguf", gguf.LlamaFileType.MOSTLY_Q8_0)
    params = make_params("http://127.0.0.1:9/v1", server={"quantization": "q4_k_m", "model_id": str(path)})
    model = {"id": str(path), "found": True, "quantization": "q4_k_m"}
    model.update(provenance._served_weights(params, model))
    assert (model["quantization"], model["quantization_declared"]) == ("q8_0", "q4_k_m")


@pytest.mark.parametrize("content", ["no header", "not a gguf", "no file type"])
def test_an_unreadable_served_gguf_leaves_the_quantization_null_with_the_reason(tmp_path, content):
    path = tmp_path / "model-Q4_1.gguf"
    if content == "not a gguf":
        path.write_bytes(b"PK\x03\x04 an archive, not weights")
    elif content == "no file type":
        gguf_file(path, None)
    params = make_params("http://127.0.0.1:9/v1", server={"model_id": str(path)})
    model = {"id": str(path), "found": True, "quantization": None}
    model.update(provenance._served_weights(params, model))
    assert model["quantization"] is None and "quantization_source" not in model
    reason = model["quantization_unknown"]
    assert reason.startswith(str(path)) and {"no header": "no regular file on this machine",
                                             "not a gguf": "not a readable GGUF file (no GGUF magic)",
                                             "no file type": "no general.file_type"}[content] in reason


def test_vllm_version_and_unreachable_server_are_recorded_not_raised(fake_server):
    params = make_params(f"{fake_server.url}/v1", server={"software": "vllm"})
    assert provenance.server_info(params)["version"] == "fake-1.0"
    gone = provenance.server_info(make_params("http://127.0.0.1:9/v1", server={"software": "vllm"}), timeout_s=0.5)
    assert gone["version"] is None and set(gone["errors"]) == {"/v1/models", "/version"}


def test_gpu_info_via_nvml_and_without_it(monkeypatch):
    info = provenance.gpu_info(FakeNvml(gpus=[FakeGpu(), FakeGpu(name="NVIDIA GeForce RTX 3090")]))
    assert info["available"] and info["driver"] == "580.82.07" and info["cuda"] == "13.0"
    assert [g["name"] for g in info["gpus"]] == ["NVIDIA H100 80GB HBM3", "NVIDIA GeForce RTX 3090"]
    assert info["gpus"][0]["memory_total_gb"] == round(80 * 2**30 / 1e9, 2)
    # theoretical bandwidth = bus width / 8 × max memory clock × 2 (H100 SXM: 5120 bit, 2619 MHz -> 3352 GB/s)
    assert info["gpus"][0]["memory_bandwidth_gbs"] == pytest.approx(3352.3, abs=0.1)
    assert info["gpus"][0]["memory_bus_width_bits"] == 5120 and info["gpus"][0]["memory_clock_max_mhz"] == 2619
    rtx = provenance.gpu_info(FakeNvml(gpus=[FakeGpu(bus_width_bits=384, mem_clock_max_mhz=9751)]))["gpus"][0]
    assert rtx["memory_bandwidth_gbs"] == pytest.approx(936.1, abs=0.1)  # the RTX 3090's published 936 GB/s
    unified = provenance.gpu_info(FakeNvml(gpus=[FakeGpu(name="NVIDIA GB10", bus_width_bits=None)]))["gpus"][0]
    assert unified["memory_bandwidth_gbs"] is None and "Not Supported" in unified["memory_bandwidth_reason"]
    broken = provenance.gpu_info(FakeNvml(init_error=NVML_ERROR_DRIVER_NOT_LOADED))
    assert broken == {"available": False, "reason": "nvmlInit failed: Driver Not Loaded"}
    monkeypatch.setitem(sys.modules, "pynvml", None)  # bindings not installed
    missing = provenance.gpu_info()
    assert missing["available"] is False and "pynvml not importable" in missing["reason"]


def test_no_secret_reaches_the_manifest(fake_server, tmp_path, monkeypatch):
    monkeypatch.setenv("FB_MANIFEST_TEST_KEY", SECRET)
    params = make_params(f"{fake_server.url}/v1", server={
        "api_key_env": "FB_MANIFEST_TEST_KEY",
        # a careless params file: the key pasted into extra_body, once under a key-like name, once in free text
        "extra_body": {"api_key": SECRET, "note": f"Bearer {SECRET}", "fake": {}}})
    session = SimpleNamespace(params=params, run_id="r", suite="text", started_unix=time.time(), out_dir=tmp_path)
    data = provenance.write_manifest(session, nvml=FakeNvml())
    text = (tmp_path / "manifest.json").read_text()
    assert SECRET not in text and SECRET not in json.dumps(data)
    assert data["params"]["server"]["api_key_env"] == "FB_MANIFEST_TEST_KEY"
    assert data["params"]["server"]["extra_body"]["api_key"] == "***"
    assert json.loads(text)["params"]["server"]["extra_body"]["note"] == "Bearer ***"
    with pytest.raises(secrets.SecretLeak):
        secrets.assert_no_secret(f"echoed {SECRET}", params.server.secret(), params.server.api_key_env)


def test_every_manifest_records_the_hosts_bandwidth_labelled_by_source(fake_server, tmp_path, monkeypatch):
    session = SimpleNamespace(params=make_params(f"{fake_server.url}/v1"), run_id="r", suite="text",
                              started_unix=time.time(), out_dir=tmp_path)
    on_gpu = provenance.write_manifest(session, nvml=FakeNvml())["bandwidth"]
    assert on_gpu["ceiling_source"] == "nvml" and on_gpu["ceiling_gbs"] == pytest.approx(3352.3, abs=0.1)
    assert on_gpu["measured"] is None and "bus width" in on_gpu["ceiling_method"]
    declared = make_params(f"{fake_server.url}/v1", host={"memory_bandwidth_gbs": 900.0})
    session.params = declared
    assert provenance.write_manifest(session, nvml=FakeNvml())["bandwidth"]["ceiling_source"] == "declared"
    # no GPU: this machine's read bandwidth, measured once and reused from the cache file
    calls = []

    def fake_measure():
        calls.append(1)
        return {"read_gbs": 21.5, "copy_gbs": 30.0, "method": "fake"}

    monkeypatch.setattr(bandwidth, "_MEMO", {})
    # an otherwise idle machine while it measures (test_bandwidth_record.py covers the rule under load)
    monkeypatch.setattr(bandwidth, "load_during", lambda fn: {**fn(), "load": {"other_cpu_percent": 0.0}})
    cache = tmp_path / "bw.json"
    cpu = bandwidth.record(None, {"available": False}, "Test CPU", 2, cache=cache, measure_fn=fake_measure)
    assert cpu["ceiling_source"] == "measured" and cpu["ceiling_gbs"] == 21.5 and cpu["measured"]["copy_gbs"] == 30
    monkeypatch.setattr(bandwidth, "_MEMO", {})
    again = bandwidth.record(None, {"available": False}, "Test CPU", 2, cache=cache, measure_fn=fake_measure)
    assert calls == [1] and again["measured"]["reused"].startswith("cache")
    other = bandwidth.record(None, {"available": False}, "Other CPU", 8, cache=cache, measure_fn=fake_measure)
    assert calls == [1, 1] and other["measured"]["reused"] == "no"
    none = bandwidth.record(None, {"available": True, "gpus": [{"memory_bandwidth_gbs": None}]}, "x", 1, cache=cache)
    assert none["ceiling_gbs"] is None and "none declared" in none["ceiling_method"]
