"""Models as PyTorch's dynamo exporter writes them (opset 18+), end to end: every opaque node is
timed as it is in its file, constants that act as attributes keep their values in every check,
and written files are standard ONNX by default."""
from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import eqsat.onnx as eo
from eqsat.cost.measured import OrtCpuCost, node_kernel

RNG = np.random.default_rng(0)


def _save(nodes, inputs, outputs, inits, path, opset=18):
    model = helper.make_model(helper.make_graph(nodes, "m", inputs, outputs, inits),
                              opset_imports=[helper.make_opsetid("", opset)])
    onnx.save(model, str(path))
    return path


def exporter_model(path):
    """Token ids (int64) -> Gather from an embedding table -> Pow(., 2.0) -> ReduceMean with its
    axes as an input (opset 18) -> MatMul: the ops that made ort-cpu refuse these models."""
    ids = helper.make_tensor_value_info("ids", TensorProto.INT64, [1, 6])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 6, 16])
    nodes = [helper.make_node("Gather", ["table", "ids"], ["e"]),
             helper.make_node("Pow", ["e", "two"], ["sq"]),
             helper.make_node("ReduceMean", ["sq", "axes"], ["ms"], keepdims=1),
             helper.make_node("Add", ["ms", "eps"], ["mse"]),
             helper.make_node("Sqrt", ["mse"], ["rms"]),
             helper.make_node("Div", ["e", "rms"], ["n"]),
             helper.make_node("MatMul", ["n", "w"], ["y"])]
    inits = [numpy_helper.from_array(RNG.standard_normal((32, 8)).astype(np.float32), "table"),
             numpy_helper.from_array(np.array(2.0, dtype=np.float32), "two"),
             numpy_helper.from_array(np.array([-1], dtype=np.int64), "axes"),
             numpy_helper.from_array(np.array(1e-6, dtype=np.float32), "eps"),
             numpy_helper.from_array(RNG.standard_normal((8, 16)).astype(np.float32), "w")]
    return _save(nodes, [ids], [y], inits, path)


def test_every_opaque_node_is_timed_at_its_own_opset_with_its_input_types(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("EQSAT_LAB_MEASUREMENTS", str(tmp_path / "db.jsonl"))
    imported = eo.load(exporter_model(tmp_path / "m.onnx"))
    opaque = [n for n in imported.graph.nodes() if n.op == "opaque"]
    assert opaque and imported.opset == 18
    model = OrtCpuCost(progress=False, warmup=2, runs=5)
    report = model.report(imported.graph)
    assert model.estimated == {} and "estimate" not in capsys.readouterr().err
    for n in opaque:
        kernel = node_kernel(n)
        assert kernel.stored_node and "as-stored" in kernel.key and model.db.get(kernel.key) is not None
    assert report.total_us > 0 and {r.kind for r in report.rows if r.op == "opaque"} == {"measured"}


def test_a_graph_with_int64_inputs_is_timed_end_to_end_with_its_types(tmp_path):
    """The end-to-end timing (calibration, the final check) exports the graph: token ids stay int64."""
    from eqsat.cost.measured.timer import export_for_timing, session, time_session

    imported = eo.load(exporter_model(tmp_path / "m.onnx"))
    path = export_for_timing(imported.graph, tmp_path / "timed.onnx")
    types = {i.name: i.type.tensor_type.elem_type for i in onnx.load(str(path)).graph.input}
    assert types == {"ids": TensorProto.INT64}
    assert time_session(session(path, 1), warmup=1, runs=3).median_us > 0


def conv_and_gemm_model(path):
    """Conv -> Relu -> Flatten -> MatMul -> Relu: the search fuses both activations into their
    producers (which onnxruntime would write as FusedConv and FusedGemm)."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4, 6, 6])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 10])
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c"], ["r"]),
             helper.make_node("Flatten", ["r"], ["f"]),
             helper.make_node("MatMul", ["f", "m"], ["p"]),
             helper.make_node("Relu", ["p"], ["y"])]
    inits = [numpy_helper.from_array(RNG.standard_normal((4, 4, 3, 3)).astype(np.float32), "w"),
             numpy_helper.from_array(RNG.standard_normal((144, 10)).astype(np.float32), "m")]
    return _save(nodes, [x], [y], inits, path, opset=17)


def test_a_written_file_is_standard_onnx_by_default(tmp_path):
    """Fused IR ops are written as their standard decomposition: only the default domain, a full
    ONNX check passes, and onnxruntime computes the input's outputs."""
    from experiments.cli import main

    src = conv_and_gemm_model(tmp_path / "cg.onnx")
    out = tmp_path / "cg.opt.onnx"
    assert main(["optimize", "--device", "h100", str(src), "--search", "eqsat", "--preset", "quick",
                 "--out", str(out)]) == 0
    written = onnx.load(str(out))
    assert {n.domain for n in written.graph.node} == {""} and {o.domain for o in written.opset_import} == {""}
    onnx.checker.check_model(written, full_check=True)
    assert eo.max_difference(src, out) < 1e-5
    acts = [n for n in eo.load(out).graph.nodes() if n.op in ("conv2d", "matmul")]
    assert acts  # the file re-imports into the IR

    contrib = tmp_path / "cg.ort.onnx"
    assert main(["optimize", "--device", "h100", str(src), "--search", "eqsat", "--preset", "quick",
                 "--out", str(contrib), "--onnx-ops", "onnxruntime"]) == 0
    kinds = {(n.op_type, n.domain) for n in onnx.load(str(contrib)).graph.node}
    assert {("FusedConv", "com.microsoft"), ("FusedGemm", "com.microsoft")} <= kinds
    assert eo.max_difference(src, contrib) < 1e-5


def test_an_onnx_file_is_priced_on_this_machine_by_default(tmp_path, monkeypatch, capsys):
    """Without --device an ONNX file is priced measured (ort-cpu: what the user runs), written with
    onnxruntime's kernels, and the device is named in the result line and the JSON; a benchmark
    graph keeps its paper's device."""
    import json

    from eqsat.cost.measured import Timing
    from eqsat.cost.measured import ortcpu as ortcpu_module
    from experiments.cli import main

    monkeypatch.setenv("EQSAT_LAB_MEASUREMENTS", str(tmp_path / "db.jsonl"))
    flat = Timing(10.0, 10.0, 10.0, 5)  # which device is chosen is the question here, not the timings
    monkeypatch.setattr(ortcpu_module, "time_graph", lambda *args, **kwargs: flat)
    monkeypatch.setattr(ortcpu_module, "time_graph_sessions",
                        lambda graphs, sessions, *args, **kwargs: [[flat for _ in graphs] for _ in range(sessions)])
    src = conv_and_gemm_model(tmp_path / "cg.onnx")
    out, report = tmp_path / "cg.opt.onnx", tmp_path / "r.json"
    assert main(["optimize", str(src), "--search", "eqsat", "--preset", "quick", "--out", str(out),
                 "--json", str(report)]) == 0
    text = capsys.readouterr().out
    assert "cg on ort-cpu:" in text and "priced on ort-cpu (the default for an ONNX file" in text
    payload = json.loads(report.read_text())
    assert payload["device"] == "ort-cpu" and "default for an ONNX file" in payload["device_chosen_by"]
    assert payload["onnx"]["onnx_ops"] == "onnxruntime"
    assert main(["optimize", "lora", "--param", "tokens=8", "--param", "d_model=64", "--search", "eqsat", "--preset",
                 "quick", "--json", str(report)]) == 0
    assert json.loads(report.read_text())["device"] == "h100"


def rms_then_lora_model(path):
    """sqrt(x*x + eps) then x@A@B with constant A, B: the search folds A@B into one weight, and the
    check must keep eps = 1e-6 (a random eps below -x*x makes the input NaN: a false alarm)."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 16])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 16])
    nodes = [helper.make_node("Mul", ["x", "x"], ["sq"]),
             helper.make_node("Add", ["sq", "eps"], ["se"]),
             helper.make_node("Sqrt", ["se"], ["r"]),
             helper.make_node("MatMul", ["r", "a"], ["ra"]),
             helper.make_node("MatMul", ["ra", "b"], ["y"])]
    inits = [numpy_helper.from_array(np.array(1e-6, dtype=np.float32), "eps"),
             numpy_helper.from_array(RNG.standard_normal((16, 4)).astype(np.float32), "a"),
             numpy_helper.from_array(RNG.standard_normal((4, 16)).astype(np.float32), "b")]
    return _save(nodes, [x], [y], inits, path, opset=17)


def test_constants_that_act_as_attributes_keep_their_values_in_the_check(tmp_path):
    from eqsat.cost.registry import cost_model
    from eqsat.ir.evaluate import compare_graphs
    from eqsat.rules.rulesets import default_rules
    from eqsat.search import run_verified
    from experiments.searches import get_search, preset_limits

    imported = eo.load(rms_then_lora_model(tmp_path / "m.onnx"))
    graph = imported.graph
    assert set(graph.fixed) == {"eps"} and float(graph.fixed["eps"]) == pytest.approx(1e-6)  # a, b: redrawn
    engine = get_search("eqsat")
    result = run_verified(engine, graph, default_rules(engine.default_rule_sets), cost_model("h100"),
                          preset_limits(engine, "quick", "m"))
    assert result.best != graph and result.verified.equal  # the fold was checked, with eps = 1e-6
    drawn = compare_graphs(graph.with_fixed({}), result.best, trials=8)  # what every draw used to do: eps < 0 in some
    assert not drawn.equal and "relative error inf" in drawn.detail



def test_an_opaque_contrib_node_is_timed_and_written_back_in_its_domain(tmp_path, monkeypatch):
    """A com.microsoft node the table does not know, after a ConvTranspose with ``auto_pad`` (which
    the op table leaves opaque) whose weight is too big to store in the node: both are timed in onnxruntime (not estimated), and the file written back
    imports the node's domain."""
    monkeypatch.setenv("EQSAT_LAB_MEASUREMENTS", str(tmp_path / "db.jsonl"))
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 64, 8, 8])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 64, 16, 16])
    nodes = [helper.make_node("ConvTranspose", ["x", "w"], ["t"], strides=[2, 2], kernel_shape=[2, 2],
                              auto_pad="SAME_UPPER"),
             helper.make_node("QuickGelu", ["t"], ["y"], domain="com.microsoft", alpha=1.702)]
    w = numpy_helper.from_array(RNG.standard_normal((64, 64, 2, 2)).astype(np.float32), "w")
    model = helper.make_model(helper.make_graph(nodes, "g", [x], [y], [w]),
                              opset_imports=[helper.make_opsetid("", 20), helper.make_opsetid("com.microsoft", 1)])
    src, out = tmp_path / "ct.onnx", tmp_path / "ct.out.onnx"
    onnx.save(model, str(src))
    imported = eo.load(src)
    assert [o.split()[0] for o in imported.opaque] == ["ConvTranspose", "QuickGelu"]
    cost = OrtCpuCost(progress=False, warmup=2, runs=5)
    assert {r.kind for r in cost.report(imported.graph).rows if r.op == "opaque"} == {"measured"}
    assert cost.estimated == {}
    eo.save(imported, imported.graph, out)
    assert ("com.microsoft", 1) in {(o.domain, o.version) for o in onnx.load(str(out)).opset_import}
    assert eo.max_difference(src, out) == 0.0


# --------------------------------------------------------------------------- hostile files (issue 39 item 9)
def _bf16(name, shape):
    return helper.make_tensor(name, TensorProto.BFLOAT16, shape, np.zeros(int(np.prod(shape)), np.uint16).tobytes(),
                              raw=True)


def _no_data(name, shape):
    return TensorProto(name=name, data_type=TensorProto.FLOAT, dims=shape)


def _external(name, shape):
    w = TensorProto(name=name, data_type=TensorProto.FLOAT, dims=shape, data_location=TensorProto.EXTERNAL)
    w.external_data.add(key="location", value="nowhere.bin")
    return w


def _w32(name, shape):
    return numpy_helper.from_array(RNG.standard_normal(shape).astype(np.float32), name)


@pytest.mark.parametrize("elem, shape, init, names", [
    (TensorProto.BFLOAT16, [2, 8], _bf16, ("graph input 'x' is bfloat16", "cast it in the file")),
    (TensorProto.FLOAT8E4M3FN, [2, 8], _w32, ("graph input 'x' is float8e4m3fn",)),
    (TensorProto.STRING, [2, 8], _w32, ("graph input 'x' is string",)),
    (TensorProto.UNDEFINED, [2, 8], _w32, ("graph input 'x' has no element type",)),
    (TensorProto.FLOAT, [2, 8], _bf16, ("node mm (MatMul): input 'w' is a bfloat16 constant",)),
    (TensorProto.FLOAT, [0, 8], _w32, ("graph input 'x' axis 0 has size 0, an empty tensor",)),
    (TensorProto.FLOAT, [2, 0], _w32, ("graph input 'x' axis 1 has size 0",)),
    (TensorProto.FLOAT, [-1, 8], _w32, ("graph input 'x' axis 0 has size -1, which is not a size",)),
    (TensorProto.FLOAT, [2, 8], _no_data, ("tensor name: w", "one and only one value field")),
    (TensorProto.FLOAT, [2, 8], _external, ("tensor name: w", "nowhere.bin")),
])
def test_a_hostile_onnx_file_is_one_sentence_naming_the_tensor(tmp_path, capsys, elem, shape, init, names):
    """bf16 inputs and zero-size axes said "symbolic dimension" or "neither a graph input, an
    initializer..." (or failed in onnxruntime after the whole search, exit 3)."""
    from experiments.cli import main

    nodes = [helper.make_node("MatMul", ["x", "w"], ["y"], name="mm"), helper.make_node("Relu", ["y"], ["z"])]
    src = _save(nodes, [helper.make_tensor_value_info("x", elem, shape)],
                [helper.make_tensor_value_info("z", elem, [shape[0], 8])], [init("w", [max(shape[1], 0), 8])],
                tmp_path / "m.onnx", opset=17)
    before = src.read_bytes()
    code = main(["optimize", str(src), "--device", "h100", "--search", "eqsat", "--out", str(tmp_path / "o.onnx")])
    out, err = capsys.readouterr()
    assert code == 2 and "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    assert err.startswith(f"eqsat-lab: error: {src}: "), err
    for name in names:
        assert name in err, err
    assert "symbolic" not in err and "neither a graph input" not in err
    assert out == "" and src.read_bytes() == before and sorted(p.name for p in tmp_path.iterdir()) == ["m.onnx"]


def test_a_bf16_initializer_read_through_a_cast_is_folded_not_refused(tmp_path):
    nodes = [helper.make_node("Cast", ["w"], ["wf"], to=TensorProto.FLOAT), helper.make_node("MatMul", ["x", "wf"], ["y"])]
    src = _save(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 8])],
                [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 8])], [_bf16("w", [8, 8])],
                tmp_path / "m.onnx", opset=17)
    imported = eo.load(src)
    assert imported.opaque == [] and imported.weights["wf"].dtype.kind == "f"


def test_the_numerical_check_holds_one_session_at_a_time(tmp_path, monkeypatch):
    """``max_difference`` opens the two models one after the other (a lean session each, closed
    before the next opens): two sessions of a large model held together doubled a write's memory."""
    pytest.importorskip("onnxruntime")
    import weakref

    from eqsat.onnx import runtime

    src = conv_and_gemm_model(tmp_path / "cg.onnx")
    alive: list[int] = [0]
    most: list[int] = [0]
    real = runtime.check_session

    def counted(path):
        s = real(path)
        alive[0] += 1
        most[0] = max(most[0], alive[0])
        weakref.finalize(s, lambda: alive.__setitem__(0, alive[0] - 1))
        return s

    monkeypatch.setattr(runtime, "check_session", counted)
    assert runtime.max_difference(src, src) == 0.0
    assert most[0] == 1 and alive[0] == 0
