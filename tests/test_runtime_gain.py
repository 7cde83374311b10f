"""A file written for onnxruntime carries a gain beyond onnxruntime's own fusions, or is the input.

MobileNetV3-Small on h100: both searches' whole gain (12.8% priced) was conv+activation fusions
that onnxruntime makes by itself. The standard file writes them back unfused, so the written file
was the input spelled again by the exporter (global ReduceMean as AveragePool, a Reshape pair
around every squeeze-excite Mul, an Identity): work the input does not do, for no gain."""
from __future__ import annotations

import json

import pytest

from eqsat.cost.roofline import RooflineCost
from eqsat.ir.graph import Graph, input_, node, weight
from eqsat.rules.rulesets import default_rules
from eqsat.search import SearchResult, run_verified
from experiments.runs.runtime_baseline import keep_runtime_gain, runtime_baseline
from experiments.searches import get_search, limits_for


def conv_relu() -> Graph:
    x = input_("x", (1, 16, 56, 56))
    return Graph((node("relu", node("conv2d", x, weight("w", (16, 16, 3, 3)), weight("b", (16,)), pad="same")),),
                 name="conv_relu")


def matmul_chain(a: str = "a", b: str = "b") -> Graph:
    """x @ A @ B with constant A, B: the product of the two weights is one smaller matmul."""
    x = input_("x", (256, 1024))
    return Graph((node("matmul", node("matmul", x, weight(a, (1024, 1024))), weight(b, (1024, 64))),),
                 name="chain")


def result(graph: Graph, best: Graph, model: RooflineCost) -> SearchResult:
    return SearchResult("x", graph.name, model.name, model.graph_time_us(graph), model.graph_time_us(best), best,
                        0.0, "done", None)


@pytest.mark.parametrize("search", ["eqsat", "taso"])
def test_a_gain_that_is_only_the_runtimes_fusion_keeps_the_input(search):
    model = RooflineCost("h100")
    g = conv_relu()
    engine = get_search(search)
    r = run_verified(engine, g, default_rules(("epilogue",)), model, limits_for(engine))
    assert r.best_us < 0.95 * r.original_us and r.best != g  # the search fuses the ReLU into the conv
    kept = keep_runtime_gain(g, r, model)
    assert kept.best == g and kept.best_us == kept.original_us
    assert "beyond onnxruntime's own fusions" in kept.stop and kept.stop.startswith(r.stop)


def test_a_gain_beyond_the_runtimes_fusions_is_kept():
    model = RooflineCost("h100")
    g = matmul_chain()
    best = Graph((node("matmul", input_("x", (256, 1024)), weight("ab", (1024, 64))),), name="chain")
    assert runtime_baseline(g, model)["runtime_fusions"] == {}
    r = result(g, best, model)
    assert r.best_us < 0.5 * r.original_us and keep_runtime_gain(g, r, model) is r


def test_another_graph_at_the_runtimes_price_keeps_the_input():
    """A best that differs from the input but runs at its price (here: other weight names) is within
    the roofline's 1% resolution: the input is written, not a re-export of it."""
    model = RooflineCost("h100")
    g, other = matmul_chain(), matmul_chain("a2", "b2")
    assert other != g
    kept = keep_runtime_gain(g, result(g, other, model), model)
    assert kept.best == g and "1.000x beyond" in kept.stop


def test_a_mobilenet_v3_block_on_h100_is_written_as_the_input_file(tmp_path, capsys):
    """The zoo's MobileNetV3 (stem, one squeeze-excite block, head) built with onnx.helper: on h100
    every priced gain is onnxruntime's ConvActivationFusion, so the written file is the input's bytes."""
    pytest.importorskip("onnxruntime")
    from experiments.cli import main
    from experiments.zoo.mobile import mobilenet_v3_small

    src = mobilenet_v3_small(tmp_path / "m.onnx", seed=0, size=16, blocks=1, classes=4)
    out, js = tmp_path / "m.opt.onnx", tmp_path / "m.json"
    assert main(["optimize", str(src), "--search", "eqsat", "--device", "h100", "--out", str(out),
                 "--json", str(js)]) == 0
    payload = json.loads(js.read_text())
    assert payload["runtime"]["runtime_fusions"].get("ConvActivationFusion", 0) >= 2
    assert payload["onnx"]["input_copied"] and out.read_bytes() == src.read_bytes()
    assert payload["best_us"] == payload["original_us"] and "beyond onnxruntime's own fusions" in payload["stop"]
    assert payload["onnx"]["written_agrees"], capsys.readouterr().out


def conv_matmul_relu(path):
    """Conv -> Relu -> Flatten -> MatMul -> Relu: onnxruntime fuses the first Relu itself; the
    second fuses only in its own kernel (FusedGemm), which a standard file cannot hold."""
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]), helper.make_node("Relu", ["c"], ["r"]),
             helper.make_node("Flatten", ["r"], ["f"]), helper.make_node("MatMul", ["f", "m"], ["p"]),
             helper.make_node("Relu", ["p"], ["y"])]
    inits = [numpy_helper.from_array(rng.standard_normal((4, 4, 3, 3)).astype(np.float32), "w"),
             numpy_helper.from_array(rng.standard_normal((144, 10)).astype(np.float32), "m")]
    graph = helper.make_graph(nodes, "cg", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4, 6, 6])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 10])], inits)
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    return path


@pytest.mark.parametrize("onnx_ops", ["standard", "onnxruntime"])
def test_a_file_that_cannot_hold_the_gain_is_the_input(tmp_path, capsys, onnx_ops):
    """The best fuses MatMul+Relu (a gain beyond onnxruntime's fusions, priced): written with
    onnxruntime's kernels the file holds it, and is written unless it runs slower than the input
    beyond the noise (then the input, with the measurement); as standard ONNX it is MatMul then
    Relu again, runs as the input does, and the input is written instead."""
    pytest.importorskip("onnxruntime")
    from experiments.cli import main

    src = conv_matmul_relu(tmp_path / "cg.onnx")
    out, js = tmp_path / "cg.opt.onnx", tmp_path / "cg.json"
    assert main(["optimize", str(src), "--search", "eqsat", "--device", "h100", "--preset", "quick", "--out",
                 str(out), "--json", str(js), "--onnx-ops", onnx_ops]) == 0
    payload = json.loads(js.read_text())
    assert payload["onnx"]["written_agrees"]
    if onnx_ops == "onnxruntime":  # priced faster; written only if it runs faster by more than the noise
        assert payload["best_us"] < payload["runtime"]["runtime_us"] or payload["onnx"]["input_copied"]
        measured = payload.get("written_measured")
        assert (not payload["onnx"]["input_copied"]) or (measured is not None and measured["slower"]
                                                          and "in onnxruntime" in payload["stop"])
    else:
        assert payload["onnx"]["input_copied"] and out.read_bytes() == src.read_bytes()
        assert "input written: the file as written is 1.000x" in payload["stop"]
        assert payload["onnx"]["written_us"] == pytest.approx(payload["runtime"]["runtime_us"])


def test_a_file_no_faster_than_its_input_in_onnxruntime_is_not_written(tmp_path):
    """The written-file check of a roofline's file (issue 53: HF LLaMA's file priced for h100 ran
    0.913x): the input against a copy of itself is not slower beyond the noise; a file priced no
    better than the input by the noise is not written (the roofline's margin)."""
    pytest.importorskip("onnxruntime")
    import shutil

    from experiments.runs.runtime_baseline import ROOFLINE_NOISE, measured_gain

    src = conv_matmul_relu(tmp_path / "cg.onnx")
    copy = shutil.copy(src, tmp_path / "copy.onnx")
    check = measured_gain(src, copy)
    assert check["runs"] >= 40 and 0.8 < check["ratio"] < 1.25 and check["noise"] < 0.2
    from eqsat.cost.roofline import RooflineCost
    from experiments.runs.runtime_baseline import input_instead

    model = RooflineCost("h100")
    runtime = {"runtime_us": 100.0}
    assert input_instead(model, runtime, {"written_us": 100.0 * (1 - ROOFLINE_NOISE / 2)}, src, copy)["measured"] is None
    assert input_instead(model, runtime, {"written_us": 90.0}, src, copy) is None  # priced 10% faster, not slower
    # (in two measurements: a copy of the input is never slower beyond the noise in both)
