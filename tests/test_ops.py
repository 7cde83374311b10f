"""The op table: shape rules, reference implementations, domains and declared properties."""
from __future__ import annotations

import itertools

import numpy as np
import pytest

from eqsat.errors import AttributeError_, DomainError, ShapeError, UnknownOpError
from eqsat.ir.domains import FAST_PRIME, FLOAT, INT, modp
from eqsat.ir.evaluate import evaluate_nodes
from eqsat.ir.graph import Graph, input_, node, topo_order
from eqsat.ir.ops import OP_TABLE, get_op

# One or more instances of every non-leaf op: (op, input shapes, attributes).
EXAMPLES = [
    ("matmul", [(3, 4), (4, 5)], {}),
    ("matmul", [(2, 3, 4), (2, 4, 5)], {"act": "relu"}),
    ("ewadd", [(3, 4), (3, 4)], {}),
    ("ewmul", [(2, 3, 4), (2, 3, 4)], {}),
    ("smul", [(3, 4), ()], {}),
    ("relu", [(3, 4)], {}),
    ("tanh", [(3, 4)], {}),
    ("relu6", [(3, 4)], {}),
    ("softmax", [(2, 3, 4)], {"axis": 1}),
    ("layernorm", [(2, 3, 4), (3, 4), (3, 4)], {"axis": 1, "epsilon": 1e-3}),
    ("erf", [(3, 4)], {}),
    ("gelu", [(3, 4)], {}),
    ("sadd", [(3, 4), ()], {}),
    ("sigmoid", [(3, 4)], {}),
    ("transpose", [(3, 4)], {}),
    ("transpose", [(2, 3, 4)], {"perm": (1, 2, 0)}),
    ("reshape", [(3, 4)], {"shape": (2, 6)}),
    ("reshape", [(3, 4)], {"shape": (-1, 3)}),
    ("concat", [(3, 4), (3, 2)], {"axis": 1}),
    ("concat", [(1, 2), (3, 2), (2, 2)], {"axis": 0}),
    ("split", [(3, 5)], {"axis": 1, "sizes": (2, 3)}),
    ("conv2d", [(2, 4, 7, 6), (6, 2, 3, 3)], {"stride": 2, "pad": "same", "groups": 2}),
    ("conv2d", [(1, 3, 8, 8), (4, 3, 3, 1)], {"pad": (1, 0), "dilation": 2, "act": "relu"}),
    ("conv2d", [(1, 2, 5, 5), (3, 2, 1, 1)], {}),
    ("conv2d", [(2, 4, 7, 6), (6, 2, 3, 3), (6,)], {"stride": 2, "pad": "same", "groups": 2, "act": "relu"}),
    ("chmul", [(2, 3, 4, 5), (3,)], {}),
    ("chmul", [(6, 2, 3, 3), (6,)], {"axis": 0}),
    ("chadd", [(2, 3, 4, 5), (3,)], {}),
    ("chadd", [(4, 5), (5,)], {"axis": -1}),
    ("affine", [(2, 3, 4, 5), (3,), (3,)], {}),
    ("pad", [(2, 3, 4)], {"pads": (0, 1, 0, 0, 2, 1)}),
    ("enlarge", [(4, 3, 1, 1)], {"size": 3}),
    ("pool_avg", [(1, 2, 6, 5)], {"kernel": 3, "stride": 2, "pad": "same"}),
    ("pool_max", [(1, 2, 6, 5)], {"kernel": 2, "stride": 2}),
    ("pow", [(3, 4)], {"exponent": 0.5}),
    ("pow", [(3, 4)], {"exponent": -1}),
    ("hardsigmoid", [(3, 4)], {"alpha": 0.25, "beta": 0.4}),
    ("hardswish", [(3, 4)], {}),
    ("gelu_tanh", [(3, 4)], {}),
    ("where", [(2, 3), (2, 3), (2, 3)], {}),
    ("where", [(1, 3), (2, 3), (1, 1)], {}),
    ("expand", [(1, 4)], {"shape": (2, 3, 4)}),
    ("reduce_mean", [(2, 3, 4)], {"axes": (-1,)}),
    ("reduce_mean", [(2, 3, 4, 5)], {"axes": (2, 3), "keepdims": 0}),
    ("slice", [(5, 6)], {"starts": (1, 0), "ends": (5, 6), "steps": (2, 1)}),
    ("gather", [(3, 5)], {"axis": 1, "indices": (4, 0, 0, 2), "index_shape": (2, 2)}),
    ("conv_transpose", [(1, 4, 3, 3), (4, 3, 3, 3)], {"stride": 2, "pads": (1, 1, 1, 1), "output_padding": 1}),
    ("conv_transpose", [(2, 4, 3, 2), (4, 2, 2, 3), (4,)], {"groups": 2, "dilation": (2, 1)}),
]


def build(op, shapes, attrs):
    xs = [input_(f"x{i}", s) for i, s in enumerate(shapes)]
    return node(op, *xs, **attrs)


def values(shapes, domain, rng):
    return {f"x{i}": domain.random(s, rng, -5, 5) for i, s in enumerate(shapes)}


def run(n, vals, domain=FLOAT):
    return evaluate_nodes(_graph(n), vals, domain)[n]


def _graph(n):
    if len(n.shapes) == 1:
        return Graph((n,))
    return Graph(tuple(node("proj", n, index=i) for i in range(len(n.shapes))))


def test_every_op_has_an_example_or_is_structural():
    covered = {op for op, _, _ in EXAMPLES}
    assert set(OP_TABLE) - covered == {"input", "weight", "proj", "noop", "opaque"}  # opaque: tests/test_onnx.py


@pytest.mark.parametrize("op,shapes,attrs", EXAMPLES)
def test_reference_output_shapes_match_the_shape_rule(op, shapes, attrs):
    n = build(op, shapes, attrs)
    rng = np.random.default_rng(0)
    for domain in (FLOAT, INT, modp()):
        if not n.spec.defined_in(n.attr_dict, domain):
            with pytest.raises(DomainError):
                run(n, values(shapes, domain, rng), domain)
            continue
        out = run(n, values(shapes, domain, rng), domain)
        outs = out if isinstance(out, tuple) else (out,)
        assert tuple(o.shape for o in outs) == n.shapes


@pytest.mark.parametrize("op,shapes,attrs", EXAMPLES)
def test_declared_linearity_holds(op, shapes, attrs):
    n = build(op, shapes, attrs)
    rng = np.random.default_rng(1)
    spec = n.spec
    linear = spec.linear_inputs(n.attr_dict, len(n.inputs))
    base = values(shapes, FLOAT, rng)
    for i in linear:
        other = dict(base)
        other[f"x{i}"] = rng.uniform(-1, 1, shapes[i])
        both = dict(base)
        both[f"x{i}"] = base[f"x{i}"] * 2.5 + other[f"x{i}"]
        lhs = _flat(run(n, both))
        rhs = 2.5 * _flat(run(n, base)) + _flat(run(n, other))
        np.testing.assert_allclose(lhs, rhs, rtol=1e-9, atol=1e-9)
    if spec.jointly_linear:
        other = values(shapes, FLOAT, rng)
        both = {k: base[k] - 3.0 * other[k] for k in base}
        np.testing.assert_allclose(_flat(run(n, both)), _flat(run(n, base)) - 3.0 * _flat(run(n, other)), atol=1e-9)
    if spec.elementwise:
        assert n.shape == shapes[0]
    if spec.commutative:
        swapped = node(op, *reversed(n.inputs), **n.attr_dict)
        np.testing.assert_allclose(_flat(run(n, base)), _flat(run(swapped, base)))


def _flat(v):
    return np.concatenate([np.ravel(x) for x in v]) if isinstance(v, tuple) else np.ravel(v)


def test_fused_activation_cancels_linearity():
    spec = get_op("conv2d")
    assert spec.linear_inputs({"act": "none"}) == (0, 1)
    assert spec.linear_inputs({"act": "relu"}) == ()


@pytest.mark.parametrize("c, o, groups, kernel, stride, pad, dilation", [
    (4, 6, 2, (3, 2), (2, 1), (1, 2), (1, 2)),  # grouped, strided, padded, dilated
    (4, 4, 4, (3, 3), (1, 1), (1, 1), (1, 1)),  # depthwise (one channel per group): a sum of taps
    (4, 4, 4, (3, 3), (2, 2), (0, 1), (2, 1)),  # depthwise, strided and dilated
    (4, 6, 2, (1, 1), (1, 1), (0, 0), (1, 1)),  # pointwise with groups: one product per group
    (4, 6, 1, (1, 1), (2, 2), (0, 0), (1, 1)),  # pointwise, strided: through the windows
])
def test_conv_matches_a_direct_loop(c, o, groups, kernel, stride, pad, dilation):
    rng = np.random.default_rng(2)
    x = rng.normal(size=(2, c, 7, 6))
    w = rng.normal(size=(o, c // groups, *kernel))
    n = node("conv2d", input_("x", x.shape), input_("w", w.shape), stride=stride, pad=pad, groups=groups,
             dilation=dilation)
    got = evaluate_nodes(Graph((n,)), {"x": x, "w": w})[n]
    xp = np.pad(x, ((0, 0), (0, 0), (pad[0], pad[0]), (pad[1], pad[1])))
    ho, wo = n.shape[2:]
    want = np.zeros(n.shape)
    per_in, per_out = c // groups, o // groups
    for b, oc, i, j in itertools.product(range(2), range(o), range(ho), range(wo)):
        g = oc // per_out
        for ci, p, q in itertools.product(range(per_in), range(kernel[0]), range(kernel[1])):
            want[b, oc, i, j] += w[oc, ci, p, q] * xp[b, g * per_in + ci, i * stride[0] + p * dilation[0],
                                                       j * stride[1] + q * dilation[1]]
    np.testing.assert_allclose(got, want, rtol=1e-12)
    xi, wi = rng.integers(0, FAST_PRIME, x.shape), rng.integers(0, FAST_PRIME, w.shape)
    fast = evaluate_nodes(Graph((n,)), {"x": xi, "w": wi}, modp(FAST_PRIME))[n]  # int64 residues: no overflow
    exact = evaluate_nodes(Graph((n,)), {"x": xi, "w": wi}, INT)[n]  # Python integers
    assert np.array_equal(fast, (exact % FAST_PRIME).astype(np.int64))


@pytest.mark.parametrize("op, kernel, stride, pad", [("pool_avg", 3, 1, "same"), ("pool_avg", 2, 2, "valid"),
                                                      ("pool_max", 3, 2, "same"), ("pool_max", 3, 1, "valid")])
def test_pools_match_a_direct_loop(op, kernel, stride, pad):
    x = np.random.default_rng(3).normal(size=(1, 2, 6, 5))
    n = node(op, input_("x", x.shape), kernel=kernel, stride=stride, pad=pad)
    got = evaluate_nodes(Graph((n,)), {"x": x})[n]
    ho, wo = n.shape[2:]
    total = (ho - 1) * stride + kernel
    top = max(total - 6, 0) // 2 if pad == "same" else 0
    left = max((wo - 1) * stride + kernel - 5, 0) // 2 if pad == "same" else 0
    fill = 0.0 if op == "pool_avg" else -np.inf
    xp = np.full((1, 2, 6 + 2 * kernel, 5 + 2 * kernel), fill)
    xp[:, :, top + kernel:top + kernel + 6, left + kernel:left + kernel + 5] = x  # generous padding
    want = np.zeros(n.shape)
    for ch, i, j in itertools.product(range(2), range(ho), range(wo)):
        r, s = i * stride + kernel, j * stride + kernel
        win = xp[0, ch, r:r + kernel, s:s + kernel]
        want[0, ch, i, j] = win.mean() if op == "pool_avg" else win.max()
    np.testing.assert_allclose(got, want, rtol=1e-12)


def test_same_padding_follows_tensorflow():
    n = build("conv2d", [(1, 1, 7, 8), (1, 1, 3, 3)], {"stride": 2, "pad": "same"})
    assert n.shape == (1, 1, 4, 4)
    n = build("pool_max", [(1, 1, 7, 7)], {"kernel": 3, "stride": 2, "pad": "valid"})
    assert n.shape == (1, 1, 3, 3)


def test_exact_integer_and_modular_evaluation():
    a = input_("a", (2, 2))
    n = node("matmul", a, a)
    big = np.array([[2**40, 3], [5, 2**40]])
    exact = evaluate_nodes(Graph((n,)), {"a": big}, INT)[n]
    assert exact[0, 0] == 2**80 + 15  # no int64 overflow
    p = 2**31 - 1
    mod = evaluate_nodes(Graph((n,)), {"a": big % p}, modp(p))[n]
    assert mod[0, 0] == (2**80 + 15) % p
    pool = node("pool_avg", input_("x", (1, 1, 2, 2)), kernel=2)
    got = evaluate_nodes(Graph((pool,)), {"x": np.array([[[[1, 2], [3, 5]]]])}, modp(p))[pool]
    assert got[0, 0, 0, 0] * 4 % p == 11


@pytest.mark.parametrize("op,shapes,attrs,needle", [
    ("matmul", [(3, 4), (5, 6)], {}, "inner dimensions"),
    ("ewadd", [(3, 4), (4, 3)], {}, "elementwise"),
    ("concat", [(3, 4), (2, 5)], {"axis": 1}, "differ only on axis 1"),
    ("conv2d", [(1, 3, 5, 5), (4, 2, 3, 3)], {}, "input channels"),
    ("reshape", [(3, 4)], {"shape": (5, 2)}, "cannot reshape"),
    ("split", [(3, 4)], {"axis": 1, "sizes": (1, 2)}, "adding up to 4"),
    ("enlarge", [(2, 2, 2, 2)], {"size": 3}, "cannot centre"),
    ("smul", [(3, 4), (1,)], {}, "scalar"),
])
def test_shape_errors_name_the_op_and_the_shapes(op, shapes, attrs, needle):
    with pytest.raises(ShapeError) as info:
        build(op, shapes, attrs)
    assert str(info.value).startswith(op) and needle in str(info.value)


def test_attribute_and_op_errors():
    x = input_("x", (1, 2, 4, 4))
    with pytest.raises(AttributeError_, match="unknown attribute"):
        node("relu", x, axis=1)
    with pytest.raises(AttributeError_, match="act"):
        node("conv2d", x, input_("w", (2, 2, 1, 1)), act="gelu")
    with pytest.raises(UnknownOpError, match="known:"):
        node("groupnorm", x)
    with pytest.raises(ShapeError, match="takes 2 input"):
        node("matmul", x)
    parts = node("split", input_("y", (2, 4)), axis=1, sizes=(2, 2))
    with pytest.raises(ShapeError, match="select one with proj"):
        node("relu", parts)


def test_nodes_are_hash_consed_and_graphs_compare_structurally():
    a, b = input_("a", (3, 3)), input_("b", (3, 3))
    assert node("matmul", a, b) is node("matmul", a, b)
    assert node("transpose", a) is node("transpose", a, perm=(1, 0))
    assert Graph((node("ewadd", a, b),)) == Graph((node("ewadd", a, b),))
    assert Graph((node("ewadd", a, b),)) != Graph((node("ewadd", b, a),))
    assert len({Graph((node("relu", a),)), Graph((node("relu", a),))}) == 1


def test_deep_graphs_need_no_recursion():
    x = input_("x", (2, 2))
    for _ in range(5000):
        x = node("relu", x)
    order = topo_order([x])
    assert len(order) == 5001 and order[0].op == "input"
    g = Graph((x,)).to_networkx()
    import networkx as nx
    assert nx.is_directed_acyclic_graph(g) and g.number_of_nodes() == 5001


@pytest.mark.parametrize("op,shapes,attrs", EXAMPLES)
def test_declared_same_rank_holds(op, shapes, attrs):
    """``same_rank``: every input has the output's rank, also when one input's rank changes (the
    shape rule either rejects it or the output follows)."""
    from eqsat.errors import EqsatError

    n = build(op, shapes, attrs)
    if not n.spec.same_rank:
        return
    required = shapes[:n.spec.arity] if n.spec.arity is not None else shapes  # not conv2d's bias
    assert all(len(s) == len(n.shape) for s in required)
    for i, s in enumerate(required):
        other = list(shapes)
        other[i] = (1,) + tuple(s)
        try:
            m = build(op, other, attrs)
        except EqsatError:
            continue
        assert all(len(x) == len(m.shape) for x in other[:len(required)])
