"""Root causes found by running ONNX's own backend test suite (``eqsat-lab experiment onnx-suite``),
each on an ``onnx.helper`` model: what is read and written back equals onnxruntime on the input."""
from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

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


def test_flatten_with_a_negative_axis_counts_from_the_end(tmp_path):
    # axis % (rank + 1) made axis -1 of a (24, 5) tensor axis 2: (120, 1) instead of (24, 5)
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 4, 5])
    shapes = {}
    for axis, want in ((-1, (24, 5)), (-2, (6, 20)), (-4, (1, 120)), (0, (1, 120)), (4, (120, 1))):
        y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [None, None])
        src = _save(tmp_path / f"flatten{axis}.onnx", [helper.make_node("Flatten", ["x"], ["y"], axis=axis)], [x], [y])
        feeds = {"x": np.arange(120, dtype=np.float32).reshape(2, 3, 4, 5)}
        imported, ref, got = _round_trip(tmp_path, src, feeds)
        shapes[axis] = imported.graph.outputs[0].shape
        assert got[0].shape == ref[0].shape == want
        np.testing.assert_array_equal(got[0], ref[0])
    assert shapes == {-1: (24, 5), -2: (6, 20), -4: (1, 120), 0: (1, 120), 4: (120, 1)}


def test_integer_sub_and_div_keep_their_element_types(tmp_path):
    # int8 Sub was written as Add(x, Mul(y, float -1)), which onnxruntime refuses, and int32 Div as a
    # product with a float reciprocal, which does not truncate: integer arithmetic stays as it was
    a = helper.make_tensor_value_info("a", TensorProto.INT8, [3, 4])
    b = helper.make_tensor_value_info("b", TensorProto.INT8, [3, 4])
    c = helper.make_tensor_value_info("c", TensorProto.INT32, [3, 4])
    d = helper.make_tensor_value_info("d", TensorProto.INT32, [3, 4])
    outs = [helper.make_tensor_value_info("s", TensorProto.INT8, [3, 4]),
            helper.make_tensor_value_info("q", TensorProto.INT32, [3, 4])]
    src = _save(tmp_path / "ints.onnx", [helper.make_node("Sub", ["a", "b"], ["s"]),
                                         helper.make_node("Div", ["c", "d"], ["q"])], [a, b, c, d], outs)
    rng = np.random.default_rng(0)
    feeds = {"a": rng.integers(-50, 50, (3, 4), dtype=np.int8), "b": rng.integers(-50, 50, (3, 4), dtype=np.int8),
             "c": rng.integers(-100, 100, (3, 4), dtype=np.int32), "d": rng.integers(1, 7, (3, 4), dtype=np.int32)}
    imported, want, got = _round_trip(tmp_path, src, feeds)
    assert sorted(o.split(" ")[0] for o in imported.opaque) == ["Div", "Sub"]
    assert "int8 arithmetic" in " ".join(imported.opaque)
    for g, w in zip(got, want):
        assert g.dtype == w.dtype
        np.testing.assert_array_equal(g, w)


def test_a_cast_to_double_is_written_with_a_double_output(tmp_path):
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])
    y = helper.make_tensor_value_info("y", TensorProto.DOUBLE, [2, 3])
    src = _save(tmp_path / "cast.onnx", [helper.make_node("Cast", ["x"], ["y"], to=TensorProto.DOUBLE)], [x], [y])
    feeds = {"x": np.linspace(-1, 1, 6, dtype=np.float32).reshape(2, 3)}
    _, want, got = _round_trip(tmp_path, src, feeds)
    assert got[0].dtype == want[0].dtype == np.float64
    np.testing.assert_array_equal(got[0], want[0])


def test_a_shape_that_follows_the_input_values_is_refused_in_one_sentence(tmp_path):
    # Tile's output shape is its run-time repeats: no static graph holds it
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])
    r = helper.make_tensor_value_info("r", TensorProto.INT64, [2])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [None, None])
    z = helper.make_tensor_value_info("z", TensorProto.FLOAT, [None, None])
    src = _save(tmp_path / "tile.onnx", [helper.make_node("Tile", ["x", "r"], ["t"]),
                                         helper.make_node("Relu", ["t"], ["y"]),
                                         helper.make_node("Tile", ["t", "r"], ["z"])], [x, r], [y, z])
    with pytest.raises(eo.OnnxError, match=r"the shape of 't' follows the input values") as err:
        eo.load(src)
    assert "\n" not in str(err.value)


def _ir3_opset9_model(path):
    """What ONNX's ``light`` models are: IR version 3, opset 9, every initializer also a graph input."""
    rng = np.random.default_rng(0)
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 144])
    inits = [numpy_helper.from_array(v.astype(np.float32), n) for n, v in (
        ("w", rng.standard_normal((4, 3, 3, 3))), ("b", rng.standard_normal(4)), ("scale", rng.uniform(0.5, 2, 4)),
        ("shift", rng.standard_normal(4)), ("mean", rng.standard_normal(4)), ("var", rng.uniform(0.5, 2, 4)))]
    inits.append(numpy_helper.from_array(np.array([1, -1], np.int64), "shape"))
    listed = [helper.make_tensor_value_info(t.name, t.data_type, list(t.dims)) for t in inits]
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], kernel_shape=[3, 3]),
             helper.make_node("BatchNormalization", ["c", "scale", "shift", "mean", "var"], ["n"]),
             helper.make_node("Relu", ["n"], ["r"]),
             helper.make_node("Reshape", ["r", "shape"], ["y"])]
    model = helper.make_model(helper.make_graph(nodes, "light", [x, *listed], [y], inits),
                              opset_imports=[helper.make_opsetid("", 9)], ir_version=3)
    onnx.checker.check_model(model)
    onnx.save(model, str(path))
    return path


def test_an_ir3_opset9_model_is_read_as_it_is_optimized_and_written_equal(tmp_path, capsys):
    from experiments.cli import main

    src = _ir3_opset9_model(tmp_path / "light.onnx")
    imported = eo.load(src)  # was: "not a valid ONNX model: w in initializer but not in graph input"
    assert imported.opset == 13 and not imported.opaque
    out = tmp_path / "light.opt.onnx"
    assert main(["optimize", str(src), "--device", "h100", "--preset", "quick", "--out", str(out)]) == 0
    assert "bn-fold-bias" in capsys.readouterr().out  # the search ran its rewrites on the imported graph
    written = tmp_path / "light.written.onnx"  # what the writer makes of it (the search may keep the input)
    eo.save(imported, imported.graph, written)
    assert onnx.load(str(written)).opset_import[0].version == 13
    feeds = {"x": np.random.default_rng(1).standard_normal((1, 3, 8, 8)).astype(np.float32)}
    want = ort.InferenceSession(str(src)).run(None, feeds)[0]
    for path in (out, written):
        np.testing.assert_allclose(ort.InferenceSession(str(path)).run(None, feeds)[0], want, rtol=1e-4, atol=1e-5)
    assert onnx.load(str(src)).ir_version == 3  # the file itself is untouched


def test_the_check_draws_inputs_inside_a_log_or_square_roots_domain(tmp_path):
    # standard normal inputs make log and sqrt NaN: the check used to call that "outputs overflow"
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 8])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 8])
    z = helper.make_tensor_value_info("z", TensorProto.FLOAT, [4, 8])
    src = _save(tmp_path / "log.onnx", [helper.make_node("Log", ["x"], ["y"]),
                                        helper.make_node("Acosh", ["x"], ["a"]),  # needs x >= 1
                                        helper.make_node("Sqrt", ["a"], ["z"])], [x], [y, z])
    imported = eo.load(src)
    eo.save(imported, imported.graph, tmp_path / "back.onnx")
    assert eo.max_difference(src, tmp_path / "back.onnx") == 0.0
    nan = _save(tmp_path / "nan.onnx", [helper.make_node("Sub", ["x", "x"], ["d"]),
                                        helper.make_node("Div", ["d", "d"], ["y"])], [x], [y])  # 0 / 0
    with pytest.raises(eo.OnnxError, match="outputs are NaN in onnxruntime on every random input"):
        eo.max_difference(nan, nan)


def test_every_integer_input_type_the_reader_lets_in_the_check_can_feed(tmp_path):
    # int16, uint16, uint32 and uint64 inputs were read, searched, and refused by the final check
    from eqsat.onnx.reader import READABLE_ELEM_TYPES
    from eqsat.onnx.runtime import _FEED_TYPES

    fed = {helper.np_dtype_to_tensor_dtype(np.dtype(t)) for t in _FEED_TYPES.values()}
    assert READABLE_ELEM_TYPES <= fed
    for elem in (TensorProto.INT16, TensorProto.UINT16, TensorProto.UINT32, TensorProto.UINT64):
        a = helper.make_tensor_value_info("a", elem, [2, 3])
        y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])
        src = _save(tmp_path / f"t{elem}.onnx", [helper.make_node("Cast", ["a"], ["c"], to=TensorProto.FLOAT),
                                                 helper.make_node("Relu", ["c"], ["y"])], [a], [y])
        imported = eo.load(src)
        eo.save(imported, imported.graph, tmp_path / "back.onnx")
        assert eo.max_difference(src, tmp_path / "back.onnx") == 0.0


def test_float32_math_inside_a_float16_graph_keeps_its_type(tmp_path):
    # attention's float32 softmax in a float16 graph: the IR writes its nodes in one float type (the
    # interface's), so the float32 part stays opaque instead of being written as float16 next to a
    # float32 Cast (onnxruntime: "Type parameter (T) of Optype (Add) bound to different types")
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT16, [2, 8])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT16, [2, 8])
    nodes = [helper.make_node("Cast", ["x"], ["x32"], to=TensorProto.FLOAT),
             helper.make_node("Softmax", ["x32"], ["p32"], axis=-1),
             helper.make_node("Mul", ["p32", "x32"], ["m32"]),
             helper.make_node("Cast", ["m32"], ["m"], to=TensorProto.FLOAT16),
             helper.make_node("Add", ["m", "x"], ["y"])]
    src = _save(tmp_path / "mixed.onnx", nodes, [x], [y])
    feeds = {"x": np.random.default_rng(2).standard_normal((2, 8)).astype(np.float16)}
    imported, want, got = _round_trip(tmp_path, src, feeds)
    assert {o.split(" ")[0] for o in imported.opaque} == {"Cast", "Softmax", "Mul"}
    assert "float arithmetic (the graph is written in float16)" in " ".join(imported.opaque)
    np.testing.assert_allclose(got[0].astype(np.float32), want[0].astype(np.float32), rtol=1e-3, atol=1e-3)


def test_a_constant_integer_output_is_computed_not_refused_as_never_computed(tmp_path):
    # Shape of a static input folds to an int64 constant, which the IR holds no node for: the graph
    # output was refused as "never computed"; it now stays the node that computes it
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])
    s = helper.make_tensor_value_info("s", TensorProto.INT64, [2])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])
    src = _save(tmp_path / "shape.onnx", [helper.make_node("Shape", ["x"], ["s"]), helper.make_node("Relu", ["x"], ["y"])],
                [x], [s, y])
    feeds = {"x": np.random.default_rng(3).standard_normal((2, 3)).astype(np.float32)}
    imported, want, got = _round_trip(tmp_path, src, feeds)
    assert [o.split(" ")[0] for o in imported.opaque] == ["Shape"]
    np.testing.assert_array_equal(got[0], [2, 3])
    np.testing.assert_array_equal(got[1], want[1])


def test_a_sequence_input_is_named_a_sequence_not_a_tensor_without_an_element_type(tmp_path):
    seq = helper.make_tensor_sequence_value_info("xs", TensorProto.FLOAT, [2])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])
    src = _save(tmp_path / "seq.onnx", [helper.make_node("SequenceAt", ["xs", "i"], ["y"])], [seq], [y],
                [numpy_helper.from_array(np.array(0, np.int64), "i")])
    with pytest.raises(eo.OnnxError, match=r"graph input 'xs' is a sequence, not a tensor") as err:
        eo.load(src)
    assert "no element type" not in str(err.value)


def test_the_check_feeds_integers_of_one_where_zero_is_no_valid_input(tmp_path):
    # Mod by an integer input of 0 fails in onnxruntime: the check used to end in an internal error
    a = helper.make_tensor_value_info("a", TensorProto.INT32, [4])
    b = helper.make_tensor_value_info("b", TensorProto.INT32, [4])
    y = helper.make_tensor_value_info("y", TensorProto.INT32, [4])
    src = _save(tmp_path / "mod.onnx", [helper.make_node("Mod", ["a", "b"], ["y"])], [a, b], [y])
    imported = eo.load(src)
    eo.save(imported, imported.graph, tmp_path / "back.onnx")
    assert eo.max_difference(src, tmp_path / "back.onnx") == 0.0
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])
    r = helper.make_tensor_value_info("r", TensorProto.INT64, [2])  # [0, 0] and [1, 1] both fail for 4 elements
    bad = _save(tmp_path / "bad.onnx", [helper.make_node("Reshape", ["x", "r"], ["y"])], [x, r],
                [helper.make_tensor_value_info("y", TensorProto.FLOAT, [None, None])])
    with pytest.raises(eo.OnnxError, match="onnxruntime cannot run the model on the check's random inputs"):
        eo.max_difference(bad, bad)


def test_an_if_whose_branches_read_the_enclosing_graph_is_kept_with_those_values(tmp_path):
    # the branches read 'h' (computed outside the If) and 'w' (an initializer): the opaque node carries
    # both into its one-node graph, and the writer renames what the branches read (refused before)
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])
    c = helper.make_tensor_value_info("c", TensorProto.BOOL, [])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])
    then = helper.make_graph([helper.make_node("Add", ["h", "w"], ["t"])], "then", [],
                             [helper.make_tensor_value_info("t", TensorProto.FLOAT, [2, 3])])
    other = helper.make_graph([helper.make_node("Mul", ["h", "w"], ["e"])], "else", [],
                              [helper.make_tensor_value_info("e", TensorProto.FLOAT, [2, 3])])
    w = numpy_helper.from_array(np.arange(6, dtype=np.float32).reshape(2, 3), "w")
    nodes = [helper.make_node("Relu", ["x"], ["h"]),
             helper.make_node("If", ["c"], ["i"], then_branch=then, else_branch=other),
             helper.make_node("Sigmoid", ["i"], ["y"])]
    src = _save(tmp_path / "if.onnx", nodes, [x, c], [y], [w])
    imported = eo.load(src)
    assert [o.split(" ")[0] for o in imported.opaque] == ["If"]
    dst = tmp_path / "written.onnx"
    eo.save(imported, imported.graph, dst)
    for cond in (True, False):
        feeds = {"x": np.random.default_rng(4).standard_normal((2, 3)).astype(np.float32), "c": np.array(cond)}
        want = ort.InferenceSession(str(src)).run(None, feeds)[0]
        np.testing.assert_allclose(ort.InferenceSession(str(dst)).run(None, feeds)[0], want, rtol=1e-6)


def test_a_layout_op_on_integers_reading_an_integer_constant_is_kept_not_refused(tmp_path):
    # AffineGrid's expansion concatenates a computed int64 tensor with an int64 constant: the IR holds
    # no integer constants, so this was refused ("a int64 constant this node reads as data")
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [3])
    y = helper.make_tensor_value_info("y", TensorProto.INT64, [4])
    three = numpy_helper.from_array(np.array([3], np.int64), "three")
    src = _save(tmp_path / "concat.onnx", [helper.make_node("Cast", ["x"], ["i"], to=TensorProto.INT64),
                                           helper.make_node("Concat", ["i", "three"], ["y"], axis=0)], [x], [y], [three])
    feeds = {"x": np.array([1.5, -2.0, 7.0], np.float32)}
    imported, want, got = _round_trip(tmp_path, src, feeds)
    assert "Concat" in " ".join(imported.opaque)
    np.testing.assert_array_equal(got[0], want[0])
