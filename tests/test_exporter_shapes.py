"""What PyTorch's exporters emit, built with onnx.helper: every node maps to the op table, the IR
evaluates like onnxruntime, merges find whole groups, and the result says what onnxruntime would
have done by itself."""
from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from eqsat import onnx as eo  # noqa: E402
from eqsat.cost.roofline import RooflineCost  # noqa: E402
from eqsat.ir.evaluate import evaluate  # noqa: E402
from experiments.zoo.legacy import EXPORTER_MODELS, LARGE  # noqa: E402


def _ir_matches_onnxruntime(path, imported):
    """The imported graph, evaluated by the op table's NumPy reference, equals onnxruntime's run of
    the file on the same inputs (so the optimizer's own verification means what the runtime does)."""
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    feeds = eo.random_feeds(session, seed=1)
    want = session.run(None, feeds)
    got = evaluate(imported.graph, {**imported.weights, **feeds})
    for w, g in zip(want, got):
        scale = max(float(np.abs(w).max()), 1e-6)
        assert float(np.abs(np.asarray(g) - w).max()) / scale < 1e-4


@pytest.mark.parametrize("name", sorted(set(EXPORTER_MODELS) - LARGE))
def test_exporter_shaped_models_import_without_opaque_nodes_and_evaluate_like_onnxruntime(tmp_path, name):
    path = EXPORTER_MODELS[name](tmp_path / f"{name}.onnx")
    imported = eo.load(path)
    assert imported.opaque == []
    _ir_matches_onnxruntime(path, imported)
    eo.save(imported, imported.graph, tmp_path / "back.onnx")
    assert eo.max_difference(path, tmp_path / "back.onnx") < 1e-5


def test_transformer_ops_are_table_ops_and_are_written_as_single_kernels(tmp_path):
    """LayerNormalization, the erf GELU pieces, the packed-projection Gather and the scalar Mul/Add
    map to layernorm, erf, split/proj, smul and sadd; a gelu written back is one Gelu kernel."""
    imported = eo.load(EXPORTER_MODELS["pt_transformer"](tmp_path / "t.onnx"))
    ops = {n.op for n in imported.graph.nodes()}
    assert {"layernorm", "erf", "smul", "sadd", "softmax", "split", "proj"} <= ops
    from eqsat.ir.graph import Graph, input_, node

    g = Graph((node("gelu", input_("x", (4, 8))),), name="g")
    eo.export_graph(g, tmp_path / "g.onnx", contrib=True)  # for onnxruntime: its one-kernel contrib Gelu
    kinds = [(n.op_type, n.domain) for n in onnx.load(str(tmp_path / "g.onnx")).graph.node if n.op_type != "Identity"]
    assert kinds == [("Gelu", "com.microsoft")]
    assert [n.op for n in eo.load(tmp_path / "g.onnx").graph.nodes() if not n.is_leaf] == ["gelu"]
    eo.export_graph(g, tmp_path / "std.onnx")  # standard ONNX before opset 20: the erf form it fuses
    assert {n.domain for n in onnx.load(str(tmp_path / "std.onnx")).graph.node} == {""}


def _pool_model(path, op, size, ceil, pads=(0, 0, 0, 0)):
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2, size, size])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 2, "h", "w"])
    extra = {"count_include_pad": 1} if op == "AveragePool" else {}
    n = helper.make_node(op, ["x"], ["y"], kernel_shape=[3, 3], strides=[2, 2], ceil_mode=ceil, pads=list(pads),
                         **extra)
    onnx.save(helper.make_model(helper.make_graph([n], "p", [x], [y]), opset_imports=[helper.make_opsetid("", 17)]),
              str(path))
    return path


@pytest.mark.parametrize("size", [7, 8, 112])
def test_ceil_mode_max_pools_map_to_the_pool_op_with_the_partial_window_as_padding(tmp_path, size):
    path = _pool_model(tmp_path / "p.onnx", "MaxPool", size, ceil=1)
    imported = eo.load(path)
    assert imported.opaque == [] and [n.op for n in imported.graph.nodes() if not n.is_leaf] == ["pool_max"]
    want = -(-(size - 3) // 2) + 1
    assert imported.graph.outputs[0].shape == (1, 2, want, want)
    eo.save(imported, imported.graph, tmp_path / "b.onnx")
    assert eo.max_difference(path, tmp_path / "b.onnx") == 0.0
    _ir_matches_onnxruntime(path, imported)


def test_a_ceil_mode_average_pool_with_a_partial_window_stays_opaque_with_its_reason(tmp_path):
    exact = eo.load(_pool_model(tmp_path / "a.onnx", "AveragePool", 7, ceil=1))  # (7 - 3) / 2 is exact
    assert exact.opaque == []
    partial = eo.load(_pool_model(tmp_path / "b.onnx", "AveragePool", 8, ceil=1))
    assert len(partial.opaque) == 1 and "partial last window" in partial.opaque[0]


def test_gather_of_a_constant_run_is_a_split_part_and_other_constant_indices_a_gather(tmp_path):
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 4, 5])
    outs = [helper.make_tensor_value_info(f"y{k}", TensorProto.FLOAT, s) for k, s in enumerate(([4, 5], [3, 2, 5],
                                                                                                [3, 2, 5]))]
    inits = [numpy_helper.from_array(np.array(v, np.int64), f"i{k}") for k, v in enumerate((2, [1, 2], [2, 0]))]
    nodes = [helper.make_node("Gather", ["x", f"i{k}"], [f"y{k}"], axis=1 if k else 0) for k in range(3)]
    onnx.save(helper.make_model(helper.make_graph(nodes, "g", [x], outs, inits),
                                opset_imports=[helper.make_opsetid("", 17)]), str(tmp_path / "g.onnx"))
    imported = eo.load(tmp_path / "g.onnx")
    assert imported.opaque == [] and [n.op for n in imported.graph.nodes() if n.op in ("split", "gather")] == \
        ["split", "split", "gather"]
    assert [o.shape for o in imported.graph.outputs] == [(4, 5), (3, 2, 5), (3, 2, 5)]
    _ir_matches_onnxruntime(tmp_path / "g.onnx", imported)


@pytest.mark.parametrize("search", ["eqsat", "taso"])
def test_three_linears_into_one_concat_merge_into_one_product_by_default(tmp_path, search, capsys):
    """The issue's QKV module: three nn.Linear on one input, one 3-input Concat. Under each search's
    default settings the best graph has one product (x . [Wq|Wk|Wv]); the written file has it and
    is equal in onnxruntime, unless onnxruntime here runs it slower than the input beyond the noise
    (it did, 0.854x: the written-file check of issue 53 then writes the input)."""
    import json

    from experiments.cli import main

    src = EXPORTER_MODELS["pt_qkv"](tmp_path / "qkv.onnx", tokens=16, d=64)
    out, js = tmp_path / "qkv.opt.onnx", tmp_path / "qkv.json"
    assert main(["optimize", "--device", "h100", str(src), "--search", search, "--out", str(out),
                 "--json", str(js)]) == 0
    payload = json.loads(js.read_text())
    ops = [n.op_type for n in onnx.load(str(out)).graph.node]
    if payload.get("written_measured"):
        assert payload["written_measured"]["slower"] and payload["onnx"]["input_copied"]
    else:
        assert ops.count("MatMul") + ops.count("Gemm") == 1
    assert eo.max_difference(src, out) < 1e-5


def test_the_result_says_which_gains_onnxruntime_makes_by_itself(tmp_path):
    """MobileNetV2 blocks: every gain the roofline credits is a conv+ReLU6 fusion onnxruntime does
    anyway, so the runtime's own graph costs what the search's best does; QKV's merge is new."""
    from eqsat.ir.graph import Graph
    from experiments.runs.runtime_baseline import runtime_baseline

    model = RooflineCost("h100")
    mobile = eo.load(EXPORTER_MODELS["pt_mobilenet_v2"](tmp_path / "m.onnx")).graph
    row = runtime_baseline(mobile, model)
    assert row["runtime_fusions"] == {"ConvActivationFusion": 6}
    assert row["runtime_us"] < 0.8 * model.graph_time_us(mobile)
    qkv = eo.load(EXPORTER_MODELS["pt_qkv"](tmp_path / "q.onnx", tokens=16, d=64)).graph
    assert runtime_baseline(qkv, model) == {"runtime_us": pytest.approx(model.graph_time_us(qkv)),
                                             "runtime_fusions": {}}
    # a fusion never duplicates a producer that another op still reads
    from eqsat.ir.graph import input_, node, weight

    x = input_("x", (1, 4, 8, 8))
    conv = node("conv2d", x, weight("w", (4, 4, 3, 3)), pad="same")
    shared = Graph((node("relu", conv), node("ewadd", conv, x)), name="shared")
    assert runtime_baseline(shared, model)["runtime_fusions"] == {}


def test_large_initializers_never_pass_through_onnx_checker_or_shape_inference(tmp_path, monkeypatch):
    """Both serialize the model they get (VGG-11: 507 MB, 10 s a call). They see a skeleton whose
    large initializers are typed graph inputs; the import is unchanged."""
    from eqsat.onnx.common import SKELETON_MAX_ELEMENTS

    seen = []
    real_check, real_infer = onnx.checker.check_model, onnx.shape_inference.infer_shapes

    def largest(model):
        seen.append(max((int(np.prod(i.dims)) for i in model.graph.initializer), default=0))
        return model

    path = EXPORTER_MODELS["pt_lora"](tmp_path / "l.onnx", tokens=8, d=128)  # weights of 16k elements
    monkeypatch.setattr(onnx.checker, "check_model", lambda m, *a, **k: real_check(largest(m), *a, **k))
    monkeypatch.setattr(onnx.shape_inference, "infer_shapes", lambda m, *a, **k: real_infer(largest(m), *a, **k))
    imported = eo.load(path)
    eo.save(imported, imported.graph, tmp_path / "b.onnx")
    assert seen and max(seen) <= SKELETON_MAX_ELEMENTS
    assert imported.weights[next(iter(imported.weights))].dtype == np.float32  # no float64 copy
    assert eo.max_difference(path, tmp_path / "b.onnx") < 1e-6


@pytest.mark.slow  # 25 s: the experiment end to end; its pieces are tested above
def test_the_onnx_experiment_takes_exporter_shaped_models_and_reports_the_runtime_baseline(tmp_path):
    import json

    from experiments.cli import main

    assert main(["experiment", "onnx", "--models", "pt_mobilenet_v2,resnet_block", "--quick", "--out",
                 str(tmp_path)]) == 0
    rows = {r["model"]: r for r in json.loads((tmp_path / "onnx.json").read_text())["rows"]}
    mobile = rows["pt_mobilenet_v2"]
    assert mobile["import_ok"] and mobile["opaque_reasons"] == "" and mobile["written_agrees"]
    assert mobile["runtime_fusions"] == "ConvActivationFusion x6"
    assert mobile["beyond_runtime"] == pytest.approx(1.0, abs=0.01)  # the whole modeled gain is the runtime's
    assert rows["resnet_block"]["import_ok"] and rows["resnet_block"]["modeled_speedup"] > 1.0


def test_a_model_the_search_keeps_is_written_as_the_input_file(tmp_path):
    """Re-exporting an unchanged transformer layer rewrote the exporter's erf GELU and packed
    projection and ran 0.94x in onnxruntime; when the search keeps the input, the file is the input.
    (Without the folds set: with it, the α search moves the attention's 1/sqrt(d) into a weight.)"""
    from experiments.cli import main

    src = EXPORTER_MODELS["pt_transformer"](tmp_path / "t.onnx")
    out = tmp_path / "t.opt.onnx"
    assert main(["optimize", "--device", "h100", str(src), "--search", "taso", "--out", str(out),
                 "--rules", "matrix", "conv", "epilogue"]) == 0
    assert out.read_bytes() == src.read_bytes()


@pytest.mark.parametrize("x_shape,w_shape,mapped", [
    ((2, 4, 5, 6), (4, 6, 7), True),  # per-head weights shared over the batch
    ((2, 4, 5, 6), (1, 4, 6, 7), True),
    ((3, 2, 4, 5, 6), (4, 6, 7), True),
    ((2, 4, 5, 6), (1, 1, 6, 7), True),  # only 1s: a 2-D weight
    ((2, 4, 5, 6), (2, 1, 6, 7), False),  # a size-1 axis in the middle would need a copy: opaque
])
def test_matmul_with_broadcast_batch_dimensions(tmp_path, x_shape, w_shape, mapped):
    out = list(np.broadcast_shapes(x_shape[:-2], w_shape[:-2])) + [x_shape[-2], w_shape[-1]]
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, list(x_shape))
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, out)
    w = numpy_helper.from_array(np.random.default_rng(0).standard_normal(w_shape).astype(np.float32), "w")
    model = helper.make_model(helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["y"])], "g", [x], [y], [w]),
                              opset_imports=[helper.make_opsetid("", 17)])
    onnx.save(model, str(tmp_path / "m.onnx"))
    imported = eo.load(tmp_path / "m.onnx")
    assert (imported.opaque == []) == mapped
    if not mapped:
        assert "broadcast batch dimensions" in imported.opaque[0]
    _ir_matches_onnxruntime(tmp_path / "m.onnx", imported)
    eo.save(imported, imported.graph, tmp_path / "b.onnx")
    assert eo.max_difference(tmp_path / "m.onnx", tmp_path / "b.onnx") < 1e-5
