"""The measured devices ``torch-cpu`` and ``torch-cuda``: kernels timed in PyTorch eager, kept in
the measurement database, calibrated end to end, and a gain taken only above the measured noise."""
from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import replace

import pytest

torch = pytest.importorskip("torch")

from eqsat.cost.measured import database, torchtime  # noqa: E402
from eqsat.cost.measured.timer import Timing  # noqa: E402
from eqsat.cost.registry import cost_model  # noqa: E402
from eqsat.errors import UnsupportedError  # noqa: E402
from eqsat.ir.graph import Graph, input_, node, weight  # noqa: E402

FAST = {"warmup": 2, "runs": 5}


@pytest.fixture
def db(monkeypatch, tmp_path):
    """A fresh measurement database, a quiet machine (nothing is timed again for load), short
    end-to-end timings."""
    path = tmp_path / "db.jsonl"
    monkeypatch.setenv("EQSAT_LAB_MEASUREMENTS", str(path))
    monkeypatch.setattr(database, "_OPEN", {})
    monkeypatch.setattr(database, "machine_load", lambda: (0.5, 2))
    monkeypatch.setattr(torchtime, "END_TO_END_SECONDS", 0.05)
    return path


def two_branches() -> Graph:
    """Two products of the same shapes (one kernel key) and their sum through relus."""
    x = input_("x", (8, 32))
    a = node("relu", node("matmul", x, weight("wa", (32, 32))))
    b = node("relu", node("matmul", x, weight("wb", (32, 32))))
    return Graph((node("ewadd", a, b),), dtype="float32", name="branches")


def fast_model(name: str):
    return cost_model(name, progress=False, **FAST)


def test_the_devices_build_by_name(db):
    one, two = cost_model("torch-cpu"), cost_model("torch-cpu:2")
    assert (one.name, one.threads, two.name, two.threads) == ("torch-cpu", 1, "torch-cpu:2", 2)
    assert "torch-cpu torch " in one.db.context.runtime and "float32" in one.db.context.runtime


def test_kernels_are_timed_once_and_read_back_by_a_second_instance(db):
    graph = two_branches()
    first = fast_model("torch-cpu")
    price = first.graph_time_us(graph)
    latency = first.latency_us(graph)
    assert 0 < price < latency < float("inf")
    assert all(r.time_us >= 0 for r in first.report(graph).rows)
    assert first.measured == 3  # the two products share a key, the relus share one, and the sum
    lines = db.read_text().splitlines()
    assert len(lines) == 4  # + the empty module's call
    assert {json.loads(line)["runtime"].split()[0] for line in lines} == {"torch-cpu"}
    database._OPEN.clear()  # as a new process
    second = fast_model("torch-cpu")
    assert second.graph_time_us(graph) == price and second.measured == 0
    assert len(db.read_text().splitlines()) == 4  # nothing timed again


def test_another_devices_lines_in_the_same_file_are_not_ours(db, recwarn):
    """ort-cpu's lines and torch-cpu's share the file: neither reads the other's, and neither warns."""
    from eqsat.cost.measured.database import Context

    db.write_text(json.dumps({"machine": "m", "runtime": "onnxruntime 1.0", "threads": 1, "key": "run-call-overhead",
                              "timing": {"median_us": 1e9, "p10_us": 1e9, "p90_us": 1e9, "runs": 1},
                              "load1": 0.1, "cores": 2}) + "\n")
    model = fast_model("torch-cpu")
    assert model.overhead_us < 1e6 and not [w for w in recwarn if "not used" in str(w.message)]
    assert isinstance(model.db.context, Context)


def test_the_calibration_runs_and_its_noise_is_the_least_gain_taken(db, monkeypatch):
    graph = two_branches()
    model = fast_model("torch-cpu")
    cal = model.calibrate(graph)
    assert cal is not None and cal.measured_us > 0 and cal.scale > 0 and model.resolution >= cal.noise
    assert model.latency_us(graph) == pytest.approx(cal.measured_us)
    a, b = model.end_to_end_us(graph, graph)
    assert a > 0 and b > 0

    # a noisy machine: the input timed against itself differs by 6%, so a rewrite predicted 4% faster is not taken
    from eqsat.search import SearchResult, keep_unresolved_gain

    # (a model of its own: the first one's resolution is this machine's real noise, 6.1% on a busy CI run)
    noisy = fast_model("torch-cpu")
    pairs = iter([(103.0, 97.0)] * 3)
    monkeypatch.setattr(noisy.tt, "time_graphs", lambda graphs, *a, **k: [Timing(u, u, u, 24) for u in next(pairs)])
    other = Graph((node("relu", graph.outputs[0]),), dtype="float32", name="other")
    noisy.calibrate(other)
    assert noisy.resolution == pytest.approx(0.06)
    result = SearchResult("eqsat", "other", noisy.name, 100.0, 96.0, graph, 0.0, "done", None)
    kept = keep_unresolved_gain(other, result, noisy)
    assert kept.best == other and "not faster by the cost model's resolution (6.0%)" in kept.stop
    assert keep_unresolved_gain(other, replace(result, best_us=90.0), noisy).best == other  # timed: 1.000x


def test_torch_cuda_needs_a_gpu(db):
    if torch.cuda.is_available():
        model = fast_model("torch-cuda")
        assert model.graph_time_us(two_branches()) > 0 and model.cuda_graph_us() > 0
        return
    with pytest.raises(UnsupportedError, match=r"^torch-cuda: this PyTorch .* sees no CUDA GPU"):
        cost_model("torch-cuda")
    from experiments.cli import main

    assert main(["cost", "qkv", "--param", "batch=4", "--device", "torch-cuda"]) == 2


def test_optimize_on_torch_cpu(db, capsys):
    from experiments.cli import main

    args = ["optimize", "lora", "--search", "eqsat", "--device", "torch-cpu", "--param", "tokens=8",
            "--param", "d_model=64", "--param", "rank=4", "--param", "dtype=fp32"]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "torch-cpu: calibrated on the input timed end to end" in out and "priced on torch-cpu" in out


def test_importing_the_cost_models_does_not_import_torch():
    code = ("import sys, eqsat.cost, eqsat.cost.roofline, eqsat.cost.registry, eqsat.cost.measured, eqsat.cost.devices; "
            "sys.exit('torch' in sys.modules)")
    assert subprocess.run([sys.executable, "-c", code], check=False).returncode == 0


def test_a_file_optimized_for_pytorch_is_written_in_standard_onnx():
    """onnxruntime's contrib kernels (FusedConv) are written only for ort-cpu: PyTorch runs none."""
    from eqsat.pipeline import writes_contrib

    assert not writes_contrib("torch-cpu:2") and writes_contrib("ort-cpu")
    assert writes_contrib("torch-cpu", onnx_ops="onnxruntime") and not writes_contrib("ort-cpu", "standard")


def test_products_read_their_weights_cold_only_when_the_models_exceed_the_cache(db, monkeypatch):
    graph = two_branches()
    model = fast_model("torch-cpu")
    model.calibrate(graph)  # 8 KB of weights: warm
    assert not model.cold_weights and "warm" in model.provenance()
    monkeypatch.setattr(model, "cache_bytes", lambda: 1024)
    model.calibrate(graph)
    assert model.cold_weights
    keys = [json.loads(line)["key"] for line in db.read_text().splitlines()]
    products = [k for k in keys if '"matmul"' in k]
    assert len(products) == 2 and sum("cold-weights" in k for k in products) == 1


def small_convnet() -> Graph:
    x = input_("x", (1, 8, 12, 12))
    y = node("conv2d", x, weight("w1", (8, 8, 3, 3)), stride=1, pad="same", act="relu", groups=1)
    return Graph((node("conv2d", y, weight("w2", (8, 8, 3, 3)), stride=1, pad="same", act="none", groups=1),),
                 dtype="fp32", name="convnet")


def test_the_layout_is_chosen_by_timing_the_graph_end_to_end_in_each(db, monkeypatch):
    model = fast_model("torch-cpu")
    assert model.choose_layout(two_branches()) is None  # no 4-D tensor: nothing to lay out
    real = model.choose_layout(small_convnet())  # timed for real, both layouts interleaved
    assert real is not None and real.default == "contiguous" and real.tried == "channels_last"
    assert real.default_us > 0 and real.tried_us > 0 and real.name in ("contiguous", "channels_last")

    asked = []

    def timed(graphs, *args, layouts=None, **kwargs):
        asked.append(tuple(layouts))
        return [Timing(u, u, u, 24) for u in speeds]
    monkeypatch.setattr(model.tt, "time_graphs", timed)
    graph = Graph((node("relu", small_convnet().outputs[0]),), dtype="float32", name="other")
    speeds = (100.0, 80.0)
    fast = model.choose_layout(graph)
    assert asked == [("contiguous", "channels_last")] * 3 and fast.name == "channels_last"
    assert fast.gain == pytest.approx(1.25) and "layout channels_last" in fast.summary()
    assert model.choose_layout(graph) == fast and len(asked) == 3  # read back from the database
    speeds = (100.0, 99.0)  # 1% is below the 2% resolution: the default is kept
    slow = model.choose_layout(Graph((node("relu", graph.outputs[0]),), dtype="float32", name="third"))
    assert slow.name == "contiguous" and not slow.changed and "kept" in slow.summary()


def test_the_optimize_job_reports_the_layout_and_the_module_uses_it(db, monkeypatch):
    from eqsat.cost import registry
    from eqsat.pipeline import optimize_model
    from eqsat.pytorch.module import to_module

    model, real = fast_model("torch-cpu"), registry.cost_model
    monkeypatch.setattr(registry, "cost_model", lambda name, **k: model if name == "torch-cpu" else real(name, **k))
    monkeypatch.setattr(model.tt, "time_graphs",
                        lambda graphs, *a, layouts=None, **k: [Timing(u, u, u, 24) for u in (100.0, 70.0)[:len(graphs)]]
                        if layouts else [Timing(100.0, 100.0, 100.0, 24)] * len(graphs))
    outcome = optimize_model(small_convnet(), search="eqsat", device="torch-cpu")
    assert outcome.layout is not None and outcome.layout.name == "channels_last"
    assert outcome.to_dict()["layout"]["gain"] == pytest.approx(100 / 70) and "layout" in outcome.phases
    assert to_module(outcome.best, layout=outcome.layout.name).layout == "channels_last"
    roofline = optimize_model(small_convnet(), search="eqsat", device="h100")
    assert roofline.layout is None and "layout" not in roofline.to_dict()
