"""Root causes found by running ONNX's own backend test suite (``eqsat-lab experiment onnx-suite``),
each on an ``onnx.helper`` model: what is read and written back equals onnxruntime on the input."""
from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper

import eqsat.onnx as eo


def _save(path, nodes, inputs, outputs, inits=(), opset=18, ir_version=None):
    graph = helper.make_graph(nodes, "m", inputs, outputs, list(inits))
    kw = {} if ir_version is None else {"ir_version": ir_version}
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], **kw)
    onnx.save(model, str(path))
    return path


def _round_trip(tmp_path, src, feeds):
    """``src`` imported and written back: both files' outputs in onnxruntime on ``feeds``."""
    imported = eo.load(src)
    dst = tmp_path / "written.onnx"
    eo.save(imported, imported.graph, dst, dtype=eo.interface_dtype(imported))
    want = ort.InferenceSession(str(src)).run(None, feeds)
    got = ort.InferenceSession(str(dst)).run(None, feeds)
    return imported, want, got


def test_an_unknown_inner_dimension_takes_the_size_onnxruntime_computes_not_the_batch(tmp_path):
    # NonZero's second dimension is data-dependent: shape inference leaves it unknown, and it used
    # to become the batch size (1), so the Transpose after it was imported as (1, 2) and not (12, 2)
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 4])
    y = helper.make_tensor_value_info("y", TensorProto.INT64, ["n", 2])
    src = _save(tmp_path / "nz.onnx", [helper.make_node("NonZero", ["x"], ["nz"]),
                                       helper.make_node("Transpose", ["nz"], ["y"], perm=[1, 0])], [x], [y])
    feeds = {"x": np.random.default_rng(1).standard_normal((3, 4)).astype(np.float32)}
    imported, want, got = _round_trip(tmp_path, src, feeds)
    assert imported.graph.outputs[0].shape == (12, 2)
    assert [n.shape for n in imported.graph.nodes() if n.op == "opaque"] == [(2, 12)]
    np.testing.assert_array_equal(got[0], want[0])
