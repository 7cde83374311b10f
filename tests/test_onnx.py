"""ONNX import, optimization, export, and equality in onnxruntime."""
from __future__ import annotations

import random

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from eqsat import onnx as eo  # noqa: E402
from eqsat.cost import RooflineCost  # noqa: E402
from eqsat.egraph import Limits, optimize  # noqa: E402
from taso_baseline.search import default_rules  # noqa: E402

RNG = np.random.default_rng(0)


def _w(name, *shape):
    return numpy_helper.from_array((RNG.standard_normal(shape) / np.sqrt(np.prod(shape[1:]))).astype(np.float32), name)


def _model(nodes, inputs, outputs, inits, path, shuffle=False):
    if shuffle:
        nodes = list(nodes)
        random.Random(3).shuffle(nodes)
    g = helper.make_graph(nodes, "m", inputs, outputs, inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    onnx.save(m, str(path))
    return path


def resnet_block(path, shuffle=False):
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 16, 8, 8])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 16, 8, 8])
    nodes = [
        helper.make_node("Conv", ["x", "w1"], ["c1"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c1"], ["r1"]),
        helper.make_node("Conv", ["r1", "w2"], ["c2"], pads=[1, 1, 1, 1]),
        helper.make_node("Conv", ["x", "w3"], ["c3"], pads=[0, 0, 0, 0]),
        helper.make_node("Add", ["c2", "c3"], ["s"]),
        helper.make_node("Relu", ["s"], ["y"]),
    ]
    return _model(nodes, [x], [y], [_w("w1", 16, 16, 3, 3), _w("w2", 16, 16, 3, 3), _w("w3", 16, 16, 1, 1)],
                  path, shuffle)


def attention(path):
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [32, 64])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [32, 64])
    shape = numpy_helper.from_array(np.array([32, 4, 16], dtype=np.int64), "hs")
    back = numpy_helper.from_array(np.array([32, 64], dtype=np.int64), "bs")
    nodes = [helper.make_node("MatMul", ["x", w], [o]) for w, o in (("wq", "q"), ("wk", "k"), ("wv", "v"))]
    for t in ("q", "k", "v"):
        nodes += [helper.make_node("Reshape", [t, "hs"], [t + "3"]),
                  helper.make_node("Transpose", [t + "3"], [t + "h"], perm=[1, 0, 2])]
    nodes += [helper.make_node("Transpose", ["kh"], ["kt"], perm=[0, 2, 1]),
              helper.make_node("MatMul", ["qh", "kt"], ["att"]),
              helper.make_node("MatMul", ["att", "vh"], ["o"]),
              helper.make_node("Transpose", ["o"], ["ot"], perm=[1, 0, 2]),
              helper.make_node("Reshape", ["ot", "bs"], ["o2"]),
              helper.make_node("MatMul", ["o2", "wo"], ["y"])]
    inits = [_w(n, 64, 64) for n in ("wq", "wk", "wv", "wo")] + [shape, back]
    return _model(nodes, [x], [y], inits, path)


def _round_trip(path, tmp_path, k_multi=2):
    imp = eo.load(path, batch=2)
    r = optimize(imp.graph, default_rules(), "h100", Limits(k_multi=k_multi))
    out = tmp_path / "opt.onnx"
    eo.save(imp, r.best, out)
    onnx.checker.check_model(onnx.load(str(out)))
    same = tmp_path / "same.onnx"
    eo.save(imp, imp.graph, same)
    assert eo.max_difference(path, same) < 1e-5
    return imp, r, eo.max_difference(path, out)


@pytest.mark.parametrize("shuffle", [False, True])
def test_resnet_block_imports_optimizes_exports_and_matches(tmp_path, shuffle):
    imp, r, diff = _round_trip(resnet_block(tmp_path / "rb.onnx", shuffle), tmp_path)
    assert imp.graph.leaves("input")[0].shape == (2, 16, 8, 8) and imp.ops["Conv"] == 3
    assert diff < 1e-4
    assert r.best_us < r.original_us  # the relus fuse into the convs at least


def test_attention_round_trip_is_cheaper_and_equal(tmp_path):
    imp, r, diff = _round_trip(attention(tmp_path / "att.onnx"), tmp_path)
    assert diff < 1e-4 and r.best_us < r.original_us
    assert RooflineCost("h100").graph_time_us(imp.graph) == pytest.approx(r.original_us)


def test_bad_files_are_clear_errors_and_write_nothing(tmp_path):
    good = resnet_block(tmp_path / "rb.onnx")
    trunc = tmp_path / "trunc.onnx"
    trunc.write_bytes(good.read_bytes()[:200])
    with pytest.raises(eo.OnnxError, match="trunc.onnx"):
        eo.load(trunc)
    m = onnx.load(str(good))
    del m.graph.initializer[0]
    missing = tmp_path / "missing.onnx"
    onnx.save(m, str(missing))
    with pytest.raises(eo.OnnxError, match="missing.onnx"):
        eo.load(missing)
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])
    two = _model([helper.make_node("TopK", ["x", "k"], ["y", "i"], axis=1)], [x], [y],
                 [numpy_helper.from_array(np.array([1], dtype=np.int64), "k")], tmp_path / "topk.onnx")
    with pytest.raises(eo.OnnxError, match="TopK"):
        eo.load(two)
    assert not (tmp_path / "out.onnx").exists()


def test_unsupported_ops_stay_as_opaque_nodes_and_the_rest_is_optimized(tmp_path):
    """Softmax and Erf have no mapping: they are kept exactly, listed, and the matmuls around them
    are still optimized (the QKV projections merge)."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [32, 64])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [32, 64])
    nodes = [helper.make_node("MatMul", ["x", w], [o]) for w, o in (("wq", "q"), ("wk", "k"), ("wv", "v"))]
    nodes += [helper.make_node("Transpose", ["k"], ["kt"], perm=[1, 0]),
              helper.make_node("MatMul", ["q", "kt"], ["s"]),
              helper.make_node("Softmax", ["s"], ["p"], axis=1),
              helper.make_node("MatMul", ["p", "v"], ["o"]),
              helper.make_node("Erf", ["o"], ["y"])]
    path = _model(nodes, [x], [y], [_w(n, 64, 64) for n in ("wq", "wk", "wv")], tmp_path / "soft.onnx", shuffle=True)
    imp, r, diff = _round_trip(path, tmp_path)
    assert sorted(o.split()[0] for o in imp.opaque) == ["Erf", "Softmax"]
    assert [n.attr("op_type") for n in r.best.nodes() if n.op == "opaque"] == ["Softmax", "Erf"]
    assert diff < 1e-4 and r.best_us < r.original_us


def test_cli_optimizes_an_onnx_file(tmp_path, capsys):
    from experiments.cli import main

    src = resnet_block(tmp_path / "rb.onnx")
    out = tmp_path / "rb_opt.onnx"
    assert main(["optimize", str(src), "--search", "eqsat", "--out", str(out), "--batch", "2"]) == 0
    text = capsys.readouterr().out
    assert "onnxruntime max relative difference" in text and out.exists()
    assert main(["optimize", str(src), "--search", "taso"]) == 2  # --out is required for a file
