"""Identities with a constant 0 or 1 (eqsat/identities.py): a zero bias and a unit scale, as random
initialization leaves them in exported models, removed by both searches; a bias that is not all
zeros, or whose value the checks do not keep, stays. Each case is an onnx.helper model optimized by
the CLI; the written file is checked for the ops it lost, for equal outputs in onnxruntime, and
for not running slower."""
from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")
from onnx import helper, numpy_helper  # noqa: E402

from eqsat import onnx as eo  # noqa: E402
from eqsat.identities import IDENTITIES  # noqa: E402
from experiments.cli import main  # noqa: E402

RNG = np.random.default_rng(0)

from tests.test_folds_rules import _model  # noqa: E402  (one onnx.helper model of x -> y)


def _arr(name: str, value: np.ndarray):
    return numpy_helper.from_array(np.asarray(value, dtype=np.float32), name)




def _optimize(tmp_path, src, search):
    out = tmp_path / f"{src.stem}.{search}.onnx"
    assert main(["optimize", str(src), "--search", search, "--device", "h100", "--out", str(out)]) == 0
    assert eo.max_difference(src, out) < 1e-5
    return out, [n.op_type for n in onnx.load(str(out)).graph.node]


def _linear(bias: np.ndarray, tmp_path, name="linear"):
    """x @ W + b twice, both adds reading one shared bias initializer (a zero bias is often one)."""
    nodes = [helper.make_node("MatMul", ["x", "W1"], ["h"]), helper.make_node("Add", ["h", "b"], ["a"]),
             helper.make_node("Relu", ["a"], ["r"]), helper.make_node("MatMul", ["r", "W2"], ["h2"]),
             helper.make_node("Add", ["h2", "b"], ["y"])]
    d = len(bias)  # large enough that onnxruntime's times are steady (the written-file check times them)
    inits = [_arr("W1", RNG.standard_normal((d, d)) * 0.1), _arr("W2", RNG.standard_normal((d, d)) * 0.1),
             _arr("b", bias)]
    return _model(tmp_path / f"{name}.onnx", nodes, (128, d), (128, d), inits)


@pytest.mark.parametrize("search", ["eqsat", "taso"])
def test_a_zero_bias_add_is_removed_by_both_searches(tmp_path, search):
    src = _linear(np.zeros(256), tmp_path)
    out, ops = _optimize(tmp_path, src, search)
    assert [op for op in ops if op != "Identity"] == ["MatMul", "Relu", "MatMul"]  # was MatMul, Add, Relu, MatMul, Add


def test_a_bias_that_is_not_all_zero_stays(tmp_path):
    bias = np.zeros(256)
    bias[7] = 1e-3
    _, ops = _optimize(tmp_path, _linear(bias, tmp_path, "almost"), "eqsat")
    assert ops.count("Add") + ops.count("Gemm") == 2, ops


def _layernorm(tmp_path, name, gamma, beta, zero, one):
    """LayerNorm as the opset-13 exporter writes it (mean, centre, variance, divide, then Mul by the
    scale and Add of the bias), after a Sub of a shift and a Div by a constant."""
    h = helper
    nodes = [h.make_node("Sub", ["x", "zero"], ["x0"]),
             h.make_node("ReduceMean", ["x0"], ["mu"], axes=[-1]), h.make_node("Sub", ["x0", "mu"], ["d"]),
             h.make_node("Mul", ["d", "d"], ["d2"]), h.make_node("ReduceMean", ["d2"], ["var"], axes=[-1]),
             h.make_node("Add", ["var", "eps"], ["ve"]), h.make_node("Sqrt", ["ve"], ["sd"]),
             h.make_node("Div", ["d", "sd"], ["n"]), h.make_node("Div", ["n", "one"], ["n1"]),
             h.make_node("Mul", ["n1", "gamma"], ["s"]), h.make_node("Add", ["s", "beta"], ["y"])]
    inits = [_arr("gamma", gamma), _arr("beta", beta), _arr("eps", np.array(1e-5)),
             _arr("zero", np.array(zero)), _arr("one", np.array(one))]
    return _model(tmp_path / f"{name}.onnx", nodes, (4, 32), (4, 32), inits, opset=13)


def test_a_decomposed_layernorm_with_unit_scale_and_zero_bias_loses_its_mul_and_add(tmp_path):
    """Initialized as PyTorch does (scale 1, bias 0, and a zero shift and a unit divisor): the
    written file reads none of those constants and has four nodes fewer than the same model with
    other values (whether it runs faster is measured by ``experiment peers``, not asserted here: a
    test does not depend on how loaded the machine is)."""
    unit_src = _layernorm(tmp_path, "unit", np.ones(32), np.zeros(32), 0.0, 1.0)
    other_src = _layernorm(tmp_path, "other", 1 + RNG.standard_normal(32) * 0.1, RNG.standard_normal(32) * 0.1,
                           0.5, 2.0)
    unit, _ = _optimize(tmp_path, unit_src, "eqsat")
    _, other_ops = _optimize(tmp_path, other_src, "eqsat")
    assert not {"gamma", "beta", "zero", "one"} & {i.name for i in onnx.load(str(unit)).graph.initializer}
    assert other_ops == [n.op_type for n in onnx.load(str(other_src)).graph.node]  # nothing to gain: kept
    assert eo.load(unit).graph.op_count() <= eo.load(unit_src).graph.op_count() - 4  # in the IR (the writer
    # spells a Sub as an Add of a negation and a broadcast between reshapes, so ONNX nodes are no measure here)


def test_the_rewrite_reads_only_values_the_checks_keep():
    """A zero weight that a product reads is redrawn in checks (not ``fixed``): no alternative."""
    from eqsat.ir.graph import Graph, input_, node, weight

    x, b = input_("x", (4, 8)), weight("b", (8,))
    g = Graph((node("chadd", node("matmul", x, weight("w", (8, 8))), b, axis=1),))
    assert len(IDENTITIES.alternatives(g.with_fixed({"b": np.zeros(8)}))) == 1
    assert IDENTITIES.alternatives(g) == []
    assert IDENTITIES.alternatives(g.with_fixed({"b": np.full(8, 0.5)})) == []
