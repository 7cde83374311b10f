"""The ``hypogpu`` device: GEMMs priced by tuned HypoGPU kernels, kept in a records file and reused."""
from __future__ import annotations

import json

import pytest

from autotune import hypogpu, tuned_records
from autotune.tuned_cost import Gemm, TunedHypoGPUCost, gemm_of, graph_gemms
from autotune.workload import Workload
from eqsat.cost.registry import MEASURED, ROOFLINE, TUNED, check_device, cost_model, parse_device
from eqsat.ir.graph import Graph, input_, node, weight
from experiments.runs.tuned_pricing import verdict_rows


def test_device_names_say_who_tunes():
    assert parse_device("hypogpu").arg == "ansor@64"
    assert parse_device("hypogpu:oracle").arg == "oracle"
    assert parse_device("hypogpu:random@016").arg == "random@16"
    assert parse_device("hypogpu").kind is TUNED
    assert parse_device("h100").kind is ROOFLINE and parse_device("ort-cpu:2").kind is MEASURED
    assert parse_device("ort-cpu:2").arg == 2
    for bad, words in (("hypogpu:nope@8", "unknown tuner 'nope'"), ("hypogpu:ansor@0", "from 1 to 4096"),
                       ("hypogpu:ansor", "from 1 to 4096")):
        with pytest.raises(ValueError, match=words):
            check_device(bad)


def test_gemm_shapes_of_matmul_batched_matmul_and_conv():
    assert gemm_of("matmul", {"act": "none"}, [(16, 4096), (4096, 1024)], [(16, 1024)]) == Gemm(16, 1024, 4096)
    assert gemm_of("matmul", {"act": "relu"}, [(8, 64, 32), (8, 32, 128)], [(8, 64, 128)]) == Gemm(512, 128, 32)
    conv = {"stride": (1, 1), "pad": "same", "act": "none", "groups": 1, "dilation": (1, 1)}
    assert gemm_of("conv2d", conv, [(2, 64, 56, 56), (128, 64, 3, 3)], [(2, 128, 56, 56)]) == Gemm(2 * 56 * 56, 128, 576)
    assert gemm_of("conv2d", conv | {"groups": 64}, [(1, 64, 8, 8), (64, 1, 3, 3)], [(1, 64, 8, 8)]) is None
    assert gemm_of("ewadd", {}, [(4, 4), (4, 4)], [(4, 4)]) is None


def test_a_gemm_costs_its_tuned_kernel_and_other_ops_hypogpus_roofline(tmp_path):
    model = TunedHypoGPUCost("oracle", records=tmp_path / "k.jsonl")
    x, w = input_("x", (16, 4096)), weight("w", (4096, 4096))
    graph = Graph((node("relu", node("matmul", x, w)),))
    mm, relu = (r for r in model.report(graph).rows if r.kind not in ("leaf", "view"))
    assert mm.kind == "tuned" and mm.time_us == pytest.approx(hypogpu.optimum(Workload(16, 4096, 4096)).time_us)
    spec = hypogpu.A100_LIKE  # relu reads and writes 16 x 4096 bf16 values: memory-bound on HypoGPU
    assert relu.kind == "memory" and relu.time_us == pytest.approx(16 * 4096 * 4 / spec.dram_bw * 1e6 + spec.launch_s * 1e6)
    assert model.name == "hypogpu:oracle" and cost_model("hypogpu:oracle").name == "hypogpu:oracle"
    assert graph_gemms(graph) == ["matmul 16x4096x4096"]


def test_a_tuned_kernel_is_reused_across_runs_and_never_retuned(tmp_path, monkeypatch):
    path = tmp_path / "kernels.jsonl"
    first = tuned_records.TunedKernels(path)
    k = first.get(64, 512, 256, "random@8", 0)
    assert first.tuned == 1 and k.trials == 8 and k.time_us > 0
    assert first.get(64, 512, 256, "random@8", 0) is k and first.tuned == 1
    row = json.loads(path.read_text())
    assert (row["M"], row["source"], row["time_us"]) == (64, "random@8", k.time_us)

    def never(*args):
        raise AssertionError("retuned a recorded kernel")

    monkeypatch.setattr(tuned_records, "tune_kernel", never)
    again = tuned_records.TunedKernels(path)
    assert again.get(64, 512, 256, "random@8", 0) == k and again.tuned == 0
    with pytest.raises(AssertionError, match="retuned"):  # another source is another kernel
        again.get(64, 512, 256, "random@16", 0)


def test_a_torn_record_is_skipped_with_a_warning_and_the_kernel_retuned(tmp_path):
    path = tmp_path / "kernels.jsonl"
    tuned_records.TunedKernels(path).get(32, 256, 128, "random@4", 0)
    path.write_text(path.read_text() + '{"M": 32, "N": 256, "K"')
    with pytest.warns(UserWarning, match="1 line"):
        kernels = tuned_records.TunedKernels(path)
    assert kernels.get(32, 256, 128, "random@4", 0).time_us > 0 and kernels.tuned == 0


def test_a_tuner_is_never_faster_than_the_oracle(tmp_path):
    kernels = tuned_records.TunedKernels(None)
    for m, n, k in ((16, 4096, 4096), (300, 700, 900)):
        assert kernels.get(m, n, k, "random@16", 0).time_us >= kernels.get(m, n, k, "oracle", 0).time_us


def test_verdict_rows_list_the_gemms_only_one_best_graph_runs():
    def cell(device, gemms, r, t):
        return {"model": "qkv", "found_on": device, "cost_on": {"a100": r, "hypogpu": t},
                "input_on": {"a100": 10.0, "hypogpu": 12.0}, "gemms": gemms}

    rows = verdict_rows([cell("a100", ["matmul 16x12288x4096"], 5.0, 9.0),
                         cell("hypogpu", ["matmul 16x4096x4096"] * 3, 6.0, 8.0)], "a100", "hypogpu")
    (row,) = rows
    assert row["gemms_only_in_roofline_best"] == "matmul 16x12288x4096 x1"
    assert row["gemms_only_in_tuned_best"] == "matmul 16x4096x4096 x3"
    assert row["tuned_gain_over_roofline_pick"] == pytest.approx(9.0 / 8.0)
