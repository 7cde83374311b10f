"""An imported model's large weights are views of the mapped file, never a second copy; and the
writer and the kernel timer hold no more copies of weights than they write."""
from __future__ import annotations

import mmap

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from eqsat import onnx as eo  # noqa: E402
from eqsat.heap import map_file, release_mapped  # noqa: E402
from eqsat.onnx.mapped import MAPPED_MIN_BYTES, read_model  # noqa: E402

RNG = np.random.default_rng(0)


def _buffer(array: np.ndarray) -> object:
    """What ``array``'s memory belongs to, through its chain of views."""
    while isinstance(array, np.ndarray) and array.base is not None:
        array = array.base
    return array.obj if isinstance(array, memoryview) else array


def _model(path):
    """``y = (x @ w + b) * s``, with large float32 and float16 weights, a large int64 table and a
    bfloat16 one (their data inline), a large weight stored as float_data, and small ones."""
    w = RNG.standard_normal((64, 512)).astype(np.float32)  # 128 KiB: mapped
    inits = [
        numpy_helper.from_array(w, "w"),
        numpy_helper.from_array(RNG.standard_normal(512).astype(np.float32), "b"),  # 2 KiB: parsed
        numpy_helper.from_array(RNG.standard_normal((300, 128)).astype(np.float16), "half"),
        numpy_helper.from_array(np.arange(20000, dtype=np.int64), "table"),
        helper.make_tensor("s", TensorProto.FLOAT, [128, 512], RNG.standard_normal(128 * 512).tolist()),
        helper.make_tensor("bf", TensorProto.BFLOAT16, [40000], np.zeros(40000, np.uint16).tobytes(), raw=True),
    ]
    nodes = [helper.make_node("MatMul", ["x", "w"], ["h"]), helper.make_node("Add", ["h", "b"], ["a"]),
             helper.make_node("Mul", ["a", "s"], ["y"])]
    graph = helper.make_graph(nodes, "m", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [128, 64])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [128, 512])], inits)
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    return path


def test_large_inline_weights_are_views_of_the_mapped_file(tmp_path):
    path = _model(tmp_path / "m.onnx")
    imported = eo.load(path)
    expected = {t.name: numpy_helper.to_array(t) for t in onnx.load(str(path)).graph.initializer}
    assert isinstance(_buffer(imported.weights["w"]), mmap.mmap)  # no copy of the weight: the file itself
    assert isinstance(_buffer(imported.weights["half"]), mmap.mmap)
    assert not isinstance(_buffer(imported.weights["b"]), mmap.mmap)  # small: parsed with the model
    assert not isinstance(_buffer(imported.weights["s"]), mmap.mmap)  # float_data: no bytes to map
    for name, array in imported.weights.items():
        if name in expected:
            assert array.dtype == expected[name].dtype and np.array_equal(array, expected[name]), name
    assert not imported.weights["w"].flags.writeable  # as to_array's view of a parsed tensor's bytes


def test_the_parsed_model_holds_no_mapped_data_and_restores_to_what_onnx_loads(tmp_path):
    path = _model(tmp_path / "m.onnx")
    read = read_model(path)
    names = [t.name for t in read.proto.graph.initializer]
    assert sorted(names[i] for i in read.spans) == ["half", "table", "w"]  # bfloat16 and float_data: parsed
    assert all(length > MAPPED_MIN_BYTES for _, length in read.spans.values())
    assert read.proto.ByteSize() < path.stat().st_size - sum(length for _, length in read.spans.values()) + 1024
    read.restore(read.proto)
    assert read.proto.SerializeToString() == onnx.load(str(path)).SerializeToString()


def test_a_file_the_walk_cannot_read_is_still_onnx_loads_error(tmp_path):
    path = _model(tmp_path / "m.onnx")
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])  # cut inside the weights
    with pytest.raises(eo.OnnxError, match="not an ONNX file"):
        eo.load(path)


def test_released_mapped_pages_read_back_the_same(tmp_path):
    path = tmp_path / "data.bin"
    values = np.arange(1 << 18, dtype=np.float32)
    path.write_bytes(values.tobytes())
    mapped = np.frombuffer(map_file(path), np.float32)
    assert float(mapped.sum()) == float(values.sum())
    release_mapped()  # drops the pages this process touched; the page cache keeps them
    assert np.array_equal(mapped, values)


def test_the_writer_folds_each_constant_alone_as_it_writes_it(tmp_path, monkeypatch):
    """Each folded constant is evaluated when it is written, alone, to the values a joint
    evaluation gives: the file holds the concatenation, and no evaluation held the other one."""
    from eqsat.ir import evaluate as evaluate_module
    from eqsat.ir.graph import Graph, input_, node, weight
    from eqsat.onnx import writer

    a, b, c = (weight(name, (8, 4)) for name in "abc")
    x = input_("x", (2, 8))
    ab, bc = node("concat", a, b, axis=1), node("concat", b, c, axis=1)
    graph = Graph((node("matmul", x, ab), node("matmul", x, bc)))
    data = {k: RNG.standard_normal((8, 4)).astype(np.float32) for k in "abc"}
    seen: list[list[str]] = []
    evaluate_nodes = evaluate_module.evaluate_nodes

    def spy(g, values, *args, **kwargs):
        seen.append(sorted(n.attr("name") for n in g.leaves("weight")))
        return evaluate_nodes(g, values, *args, **kwargs)

    monkeypatch.setattr(writer, "evaluate_nodes", spy)
    imported = eo.export_graph(graph, tmp_path / "two.onnx", weights=data)
    assert seen == [["a", "b"], ["b", "c"]]
    got = {t.name: numpy_helper.to_array(t) for t in onnx.load(str(tmp_path / "two.onnx")).graph.initializer}
    joint = evaluate_nodes(Graph((ab, bc)), imported.weights)
    assert sorted(map(bytes, (joint[ab].astype(np.float32), joint[bc].astype(np.float32)))) == \
        sorted(bytes(v) for v in got.values() if v.shape == (8, 8))


def test_a_stored_kernel_is_written_as_its_model_serializes(tmp_path):
    """The stored node's model streamed to a file (its constants from one value each) is the
    model built in memory, field for field."""
    from eqsat.onnx.runtime import node_model, write_node_model

    graph = helper.make_graph([helper.make_node("Gather", ["in0", "in1"], ["out0"])], "Gather",
                              [helper.make_tensor_value_info("in0", TensorProto.FLOAT, [3000, 16]),
                               helper.make_tensor_value_info("in1", TensorProto.INT64, [4])],
                              [onnx.ValueInfoProto(name="out0")])
    hex_ = graph.SerializeToString().hex()
    path = write_node_model(hex_, tmp_path / "kernel.onnx", 17, (True, False))
    expected = node_model(hex_, 17, (True, False))
    assert len(expected.graph.initializer) == 1 and not expected.graph.input[1:]  # in0 is a constant
    assert onnx.load(str(path)).SerializeToString() == expected.SerializeToString()


def test_an_old_opset_model_is_converted_with_its_mapped_weights(tmp_path):
    """The opset converter rewrites the whole model: it is given the mapped data first."""
    w = RNG.standard_normal((64, 512)).astype(np.float32)
    graph = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["y"])], "old",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 64])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 512])],
                              [numpy_helper.from_array(w, "w")])
    path = tmp_path / "old.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 11)]), str(path))
    imported = eo.load(path)
    assert imported.opset == 13 and np.array_equal(imported.weights["w"], w)


def test_onnxruntime_sizes_an_unknown_dimension_with_the_mapped_weights(tmp_path):
    """A shape only onnxruntime knows is found by running the model in memory: with the mapped
    weights' data (without it the node ran alone on zeros: no element was nonzero)."""
    w = RNG.standard_normal((4, 8192)).astype(np.float32)
    graph = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["h"]), helper.make_node("NonZero", ["h"], ["y"])],
                              "nz", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 4])],
                              [helper.make_tensor_value_info("y", TensorProto.INT64, [2, "n"])],
                              [numpy_helper.from_array(w, "w")])
    path = tmp_path / "nz.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    assert read_model(path).spans  # the weight is mapped
    imported = eo.load(path)
    assert [n.shape for n in imported.graph.nodes() if n.op == "opaque"] == [(2, 3 * 8192)]
