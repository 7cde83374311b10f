"""The ops PyTorch's dynamo exporter emits at opset 18-20, one small onnx.helper model each: it imports
with no opaque node, the IR evaluates it like onnxruntime, and the file written back runs in
onnxruntime with equal outputs. Also: the reader takes opsets 13-21, where attributes became inputs."""
from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from eqsat import onnx as eo  # noqa: E402
from eqsat.ir.evaluate import evaluate  # noqa: E402

RNG = np.random.default_rng(0)
BIG = np.iinfo(np.int64).max


def _i64(name, values):
    return numpy_helper.from_array(np.asarray(values, dtype=np.int64), name)


def _f32(name, values):
    return numpy_helper.from_array(np.asarray(values, dtype=np.float32), name)


def _model(path, nodes, inputs, out_shape, inits=(), opset=18):
    ins = [helper.make_tensor_value_info(k, TensorProto.FLOAT, list(s)) for k, s in inputs.items()]
    out = helper.make_tensor_value_info("y", TensorProto.FLOAT, list(out_shape))
    graph = helper.make_graph(nodes, "m", ins, [out], list(inits))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    onnx.checker.check_model(model, full_check=True)
    onnx.save(model, str(path))
    return path


def _check_round_trip(path, tmp_path):
    """No opaque node; the IR equals onnxruntime; the written file equals the input in onnxruntime."""
    imported = eo.load(path)
    assert imported.opaque == []
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    feeds = eo.random_feeds(session, seed=1)
    want = session.run(None, feeds)
    got = evaluate(imported.graph, {**imported.weights, **feeds})
    for w, g in zip(want, got):
        scale = max(float(np.abs(w).max()), 1e-6)
        assert float(np.abs(np.asarray(g) - w).max()) / scale < 1e-5
    eo.save(imported, imported.graph, tmp_path / "back.onnx")
    assert eo.max_difference(path, tmp_path / "back.onnx") < 1e-5
    return imported


def _ops(imported):
    return sorted({n.op for n in imported.graph.nodes() if not n.is_leaf and not n.is_const})


X4 = {"x": (1, 4, 6, 6)}
X3 = {"x": (2, 5, 8)}
TRIL = np.tril(np.ones((1, 1, 5, 5), dtype=bool))

# (case, nodes, inputs, output shape, initializers, opset, IR ops expected among the non-constant nodes)
CASES = [
    ("reducemean-rmsnorm", [helper.make_node("Mul", ["x", "x"], ["s"]),
                            helper.make_node("ReduceMean", ["s", "ax"], ["y"], keepdims=1)],
     X3, (2, 5, 1), [_i64("ax", [-1])], 18, {"reduce_mean", "ewmul"}),
    ("reducemean-global-pool", [helper.make_node("ReduceMean", ["x", "ax"], ["y"], keepdims=1)],
     X4, (1, 4, 1, 1), [_i64("ax", [-2, -1])], 18, {"pool_avg"}),
    ("reducemean-attr-opset13", [helper.make_node("ReduceMean", ["x"], ["y"], axes=[1], keepdims=0)],
     X3, (2, 8), [], 13, {"reduce_mean"}),
    ("reducemean-all-axes", [helper.make_node("ReduceMean", ["x"], ["y"], keepdims=0)], X3, (), [], 18,
     {"reduce_mean"}),
    ("hardswish", [helper.make_node("HardSwish", ["x"], ["y"])], X4, X4["x"], [], 18, {"hardswish"}),
    ("hardsigmoid", [helper.make_node("HardSigmoid", ["x"], ["y"], alpha=1 / 6, beta=0.5)], X4, X4["x"], [], 18,
     {"hardsigmoid"}),
    ("where-causal-mask", [helper.make_node("Where", ["m", "x", "ninf"], ["s"]),
                           helper.make_node("Softmax", ["s"], ["y"], axis=-1)],
     {"x": (1, 2, 5, 5)}, (1, 2, 5, 5), [numpy_helper.from_array(TRIL, "m"), _f32("ninf", -np.inf)], 18,
     {"where", "softmax"}),
    ("gelu-tanh", [helper.make_node("Gelu", ["x"], ["y"], approximate="tanh")], X3, X3["x"], [], 20,
     {"gelu_tanh"}),
    ("gelu-erf", [helper.make_node("Gelu", ["x"], ["y"])], X3, X3["x"], [], 20, {"gelu"}),
    ("convtranspose", [helper.make_node("ConvTranspose", ["x", "w", "b"], ["y"], strides=[2, 2], pads=[1, 1, 1, 1],
                                        output_padding=[1, 1], kernel_shape=[3, 3])],
     X4, (1, 3, 12, 12), [_f32("w", RNG.standard_normal((4, 3, 3, 3))), _f32("b", RNG.standard_normal(3))], 18,
     {"conv_transpose"}),
    ("convtranspose-groups", [helper.make_node("ConvTranspose", ["x", "w"], ["y"], group=2, dilations=[2, 1])],
     X4, (1, 4, 8, 7), [_f32("w", RNG.standard_normal((4, 2, 2, 2)))], 18, {"conv_transpose"}),
    ("gather-constant-indices", [helper.make_node("Gather", ["x", "i"], ["y"], axis=2)],
     X3, (2, 5, 2, 2), [_i64("i", [[7, 0], [-1, 3]])], 18, {"gather"}),
    ("slice-rotary-half", [helper.make_node("Slice", ["x", "s", "e", "a"], ["y"])],
     X3, (2, 5, 4), [_i64("s", [4]), _i64("e", [BIG]), _i64("a", [-1])], 18, {"split", "proj"}),
    ("slice-strided", [helper.make_node("Slice", ["x", "s", "e", "a", "st"], ["y"])],
     X3, (2, 2, 4), [_i64("s", [1, 0]), _i64("e", [-1, BIG]), _i64("a", [1, 2]), _i64("st", [2, 2])], 18,
     {"slice"}),
    ("split-num-outputs", [helper.make_node("Split", ["x"], ["a", "b", "c"], axis=2, num_outputs=3),
                           helper.make_node("Concat", ["c", "a", "b"], ["y"], axis=2)],
     {"x": (2, 5, 10)}, (2, 5, 10), [], 18, {"split", "concat"}),
    ("slice-negative-clamped-no-axes", [helper.make_node("Slice", ["x", "s", "e"], ["y"])],
     X3, (1, 3, 8), [_i64("s", [-1, 1]), _i64("e", [BIG, -1])], 18, {"slice"}),
    ("pow-cube", [helper.make_node("Pow", ["x", "e"], ["y"])], X3, X3["x"], [_f32("e", 3.0)], 18, {"pow"}),
    ("pow-square", [helper.make_node("Pow", ["x", "e"], ["y"])], X3, X3["x"], [_f32("e", 2.0)], 18, {"ewmul"}),
    ("sqrt-reciprocal-rsqrt", [helper.make_node("Mul", ["x", "x"], ["s"]),
                               helper.make_node("Add", ["s", "eps"], ["v"]),
                               helper.make_node("Sqrt", ["v"], ["r"]),
                               helper.make_node("Reciprocal", ["r"], ["y"])],
     X3, X3["x"], [_f32("eps", 1e-6)], 18, {"ewmul", "sadd", "pow"}),
    ("neg-sub", [helper.make_node("Neg", ["x"], ["n"]), helper.make_node("Sub", ["n", "x"], ["y"])],
     X3, X3["x"], [], 18, {"smul", "ewadd"}),
    ("sub-div-constant-tensors", [helper.make_node("Sub", ["x", "c"], ["s"]), helper.make_node("Div", ["s", "c"], ["y"])],
     X3, X3["x"], [_f32("c", RNG.uniform(1, 2, (5, 8)))], 18, {"chadd", "chmul"}),
    ("div-by-tensor", [helper.make_node("Mul", ["x", "x"], ["s"]), helper.make_node("Add", ["s", "one"], ["d"]),
                       helper.make_node("Div", ["x", "d"], ["y"])],
     X3, X3["x"], [_f32("one", 1.0)], 18, {"ewmul", "sadd", "pow"}),
    ("mul-rotary-broadcast", [helper.make_node("Mul", ["x", "cos"], ["a"]),
                              helper.make_node("Add", ["a", "z"], ["y"])],
     {"x": (1, 3, 5, 4), "z": (1, 1, 5, 4)}, (1, 3, 5, 4), [_f32("cos", RNG.standard_normal((1, 1, 5, 4)))], 18,
     {"chmul", "chadd"}),
    ("add-outer-broadcast", [helper.make_node("Add", ["x", "z"], ["y"])], {"x": (3, 1, 4), "z": (1, 5, 1)},
     (3, 5, 4), [], 18, {"ewadd", "expand"}),
]


@pytest.mark.parametrize("case,nodes,inputs,out,inits,opset,ops", CASES, ids=[c[0] for c in CASES])
def test_each_dynamo_op_imports_evaluates_and_writes_back_equal(tmp_path, case, nodes, inputs, out, inits, opset,
                                                               ops):
    path = _model(tmp_path / f"{case}.onnx", nodes, inputs, out, inits, opset)
    imported = _check_round_trip(path, tmp_path)
    assert ops <= set(_ops(imported)), _ops(imported)


def test_gelu_tanh_below_opset_20_is_written_as_its_formula(tmp_path):
    """At opset 18 there is no tanh Gelu kernel: the writer spells the formula in standard ops."""
    from eqsat.ir.graph import Graph, input_, node

    eo.export_graph(Graph((node("gelu_tanh", input_("x", (3, 4))),)), tmp_path / "g.onnx")
    kinds = {n.op_type for n in onnx.load(str(tmp_path / "g.onnx")).graph.node}
    assert "Tanh" in kinds and "Gelu" not in kinds and all(n.domain == "" for n in onnx.load(
        str(tmp_path / "g.onnx")).graph.node)
    imported = eo.load(tmp_path / "g.onnx")
    x = RNG.standard_normal((3, 4))
    want = 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x ** 3)))
    got = ort.InferenceSession(str(tmp_path / "g.onnx")).run(None, {"x": x.astype(np.float32)})[0]
    assert np.abs(got - want).max() < 1e-5 and imported.opaque == []


@pytest.mark.parametrize("opset", [13, 17, 18, 20, 21])
def test_the_reader_takes_opsets_13_to_21_where_attributes_became_inputs(tmp_path, opset):
    """Split sizes (an input from 13), Squeeze/Unsqueeze axes (inputs from 13) and ReduceMean axes
    (an input from 18) in one model at each opset; written back at the same opset."""
    reduce = (helper.make_node("ReduceMean", ["p0", "rax"], ["m"], keepdims=1) if opset >= 18
              else helper.make_node("ReduceMean", ["p0"], ["m"], axes=[2], keepdims=1))
    nodes = [helper.make_node("Split", ["x", "sizes"], ["p0", "p1"], axis=2),
             reduce,
             helper.make_node("Squeeze", ["m", "sq"], ["q"]),
             helper.make_node("Unsqueeze", ["q", "sq"], ["u"]),
             helper.make_node("Mul", ["p1", "u"], ["y"])]
    inits = [_i64("sizes", [3, 5]), _i64("sq", [2])] + ([_i64("rax", [2])] if opset >= 18 else [])
    path = _model(tmp_path / "m.onnx", nodes, X3, (2, 5, 5), inits, opset)
    imported = _check_round_trip(path, tmp_path)
    assert imported.opset == opset and onnx.load(str(tmp_path / "back.onnx")).opset_import[0].version == opset


def test_computed_gather_indices_and_where_conditions_stay_opaque_with_their_reasons(tmp_path):
    """Token ids into an embedding table are an integer tensor, a runtime condition a boolean one:
    the IR holds real-valued tensors, so these nodes stay opaque, say why, and still round-trip."""
    ids = helper.make_tensor_value_info("ids", TensorProto.INT64, [2, 3])
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3, 4])
    nodes = [helper.make_node("Gather", ["table", "ids"], ["e"]),
             helper.make_node("Greater", ["x", "zero"], ["c"]),
             helper.make_node("Where", ["c", "e", "x"], ["y"])]
    inits = [_f32("table", RNG.standard_normal((10, 4))), _f32("zero", 0.0)]
    model = helper.make_model(helper.make_graph(nodes, "g", [ids, x], [y], inits),
                              opset_imports=[helper.make_opsetid("", 18)])
    onnx.save(model, str(tmp_path / "g.onnx"))
    imported = eo.load(tmp_path / "g.onnx")
    reasons = {o.split()[0]: o for o in imported.opaque}
    assert set(reasons) == {"Gather", "Greater", "Where"}
    assert "computed at run time" in reasons["Gather"] and "computed" in reasons["Where"]
    eo.save(imported, imported.graph, tmp_path / "back.onnx")
    assert eo.max_difference(tmp_path / "g.onnx", tmp_path / "back.onnx") == 0.0


@pytest.mark.parametrize("op,rank,attrs", [
    ("pow", 3, {"exponent": 0.5}), ("hardswish", 4, {}), ("hardsigmoid", 4, {}), ("gelu_tanh", 3, {}),
    ("reduce_mean", 3, {"axes": (2,), "keepdims": 1}), ("reduce_mean", 3, {"axes": (1,), "keepdims": 0}),
])
def test_the_new_shape_rules_run_on_symbolic_sizes(op, rank, attrs):
    """The e-graph runs shape rules on symbolic sizes to derive rule conditions: plain int arithmetic."""
    from eqsat.ir.ops import get_op
    from eqsat.ir.symbolic import Sym, recording

    spec = get_op(op)
    x = tuple(Sym.atom(f"?d{k}") for k in range(rank))
    with recording():
        (out,) = spec.shape(dict(spec.canonical_attrs(attrs, [(2,) * rank])), [x])
    keep = attrs.get("keepdims", 1)
    axes = attrs.get("axes", ())
    want = tuple(1 if k in axes else d for k, d in enumerate(x)) if keep else tuple(d for k, d in enumerate(x)
                                                                                    if k not in axes)
    assert [repr(d) for d in out] == [repr(d) for d in want]


def test_the_mean_is_exact_modulo_a_prime():
    """reduce_mean declares the mod domain: its mean times the count is the sum, mod p."""
    from eqsat.ir.domains import FAST_PRIME, modp
    from eqsat.ir.evaluate import evaluate_nodes
    from eqsat.ir.graph import Graph, input_, node

    n = node("reduce_mean", input_("x", (2, 3, 5)), axes=(1, 2), keepdims=0)
    x = RNG.integers(0, FAST_PRIME, (2, 3, 5))
    got = evaluate_nodes(Graph((n,)), {"x": x}, modp(FAST_PRIME))[n]
    assert np.array_equal(got * 15 % FAST_PRIME, x.sum(axis=(1, 2)) % FAST_PRIME)


def test_a_causal_mask_is_written_at_its_own_size_not_once_per_head(tmp_path):
    nodes = [helper.make_node("Where", ["m", "x", "ninf"], ["s"]), helper.make_node("Softmax", ["s"], ["y"], axis=-1)]
    inits = [numpy_helper.from_array(TRIL, "m"), _f32("ninf", -np.inf)]
    path = _model(tmp_path / "w.onnx", nodes, {"x": (1, 8, 5, 5)}, (1, 8, 5, 5), inits)
    imported = _check_round_trip(path, tmp_path)
    written = onnx.load(str(tmp_path / "back.onnx")).graph.initializer
    assert max(int(np.prod(i.dims)) for i in written) == 25 and _ops(imported) == ["softmax", "where"]


def test_slices_of_one_tensor_are_written_as_slices_not_one_split_each(tmp_path):
    # q, k, v = qkv[0], qkv[1], qkv[2] as the exporter writes it: three Slices of axis 0. Each imports
    # as a split part; written as a Split per part, every one copied the whole tensor.
    nodes = [helper.make_node("Slice", ["x", f"s{k}", f"e{k}", "a"], [f"p{k}"]) for k in range(3)]
    nodes += [helper.make_node("Mul", ["p0", "p1"], ["qk"]), helper.make_node("Add", ["qk", "p2"], ["y"])]
    inits = [_i64("a", [0])] + [_i64(f"s{k}", [k]) for k in range(3)] + [_i64(f"e{k}", [k + 1]) for k in range(3)]
    path = _model(tmp_path / "qkv.onnx", nodes, {"x": (3, 4, 5)}, (1, 4, 5), inits)
    imported = _check_round_trip(path, tmp_path)
    assert "split" in _ops(imported)
    written = [n.op_type for n in onnx.load(str(tmp_path / "back.onnx")).graph.node]
    assert written.count("Slice") == 3 and "Split" not in written


def test_a_split_whose_parts_are_all_read_is_one_split(tmp_path):
    nodes = [helper.make_node("Split", ["x", "sizes"], ["p0", "p1"], axis=1),
             helper.make_node("Mul", ["p0", "p1"], ["y"])]
    path = _model(tmp_path / "split.onnx", nodes, {"x": (2, 6)}, (2, 3), [_i64("sizes", [3, 3])])
    _check_round_trip(path, tmp_path)
    written = [n.op_type for n in onnx.load(str(tmp_path / "back.onnx")).graph.node]
    assert written.count("Split") == 1 and "Slice" not in written


def test_a_linear_layer_on_a_batch_is_written_back_as_one_matmul_without_reshapes(tmp_path):
    # nn.Linear on (batch, tokens, features): MatMul by a 2-D weight, then Add of the bias. The IR
    # reads it as reshape, 2-D matmul, reshape back; the file gets the one N-D MatMul again.
    nodes = [helper.make_node("MatMul", ["x", "w"], ["xw"]), helper.make_node("Add", ["xw", "b"], ["y"])]
    inits = [_f32("w", RNG.standard_normal((8, 6))), _f32("b", RNG.standard_normal(6))]
    path = _model(tmp_path / "linear.onnx", nodes, X3, (2, 5, 6), inits)
    imported = _check_round_trip(path, tmp_path)
    assert "reshape" in _ops(imported)
    written = [n.op_type for n in onnx.load(str(tmp_path / "back.onnx")).graph.node]
    assert sorted(written) == ["Add", "MatMul"]
