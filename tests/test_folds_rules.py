"""The folds rule set (eqsat/rules/folds.rules): a LoRA adapter merged into its base weight, a
constant scale moved into a weight, reshape and transpose chains that undo each other removed.
Each case is a small onnx.helper model optimized by the CLI; the written file is checked for the
ops it should have lost and for equal outputs in onnxruntime."""
from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from eqsat import onnx as eo  # noqa: E402
from eqsat.rules.rulefile import load_rules, parse_rule  # noqa: E402
from eqsat.rules.rulesets import DEFAULT_RULE_SETS, FOLD, FULL_RULE_SETS, RULE_SETS  # noqa: E402
from experiments.cli import main  # noqa: E402

RNG = np.random.default_rng(0)


def _w(name: str, *shape: int, scale: float = 1.0):
    return numpy_helper.from_array((RNG.standard_normal(shape) * scale).astype(np.float32), name)


def _model(path, nodes, x_shape, y_shape, inits, opset=18):
    graph = helper.make_graph(nodes, "m", [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(x_shape))],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, list(y_shape))], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    onnx.checker.check_model(model, full_check=True)
    onnx.save(model, str(path))
    return path


def _optimize(tmp_path, src, search="eqsat", onnx_ops="standard"):
    out = tmp_path / f"{src.stem}.{search}.onnx"
    assert main(["optimize", str(src), "--search", search, "--device", "h100", "--out", str(out),
                 "--onnx-ops", onnx_ops]) == 0
    assert eo.max_difference(src, out) < 1e-5
    return [n.op_type for n in onnx.load(str(out)).graph.node]


def test_fold_is_a_shipped_default_set_and_every_rule_verifies():
    from rulegen.verify import verify_rule, verify_rules

    assert FOLD in DEFAULT_RULE_SETS and FOLD in FULL_RULE_SETS
    rules = load_rules(RULE_SETS[FOLD].path)
    assert all(r.origin == "hand-written" for r in rules)
    assert [v.rule for v in verify_rules(rules).verdicts if not v.ok] == []
    # a transpose pair that does not undo itself, and a scale moved past a sum it does not scale
    for wrong in ("(transpose :perm [0 2 3 1] (transpose :perm [0 2 3 1] ?X)) => ?X ; vars=X:?x?x?x?",
                  "(smul (chadd :axis ?a ?X ?b) ?c) => (chadd :axis ?a (smul ?X ?c) ?b) ; vars=X:?x?,b:?,c:"):
        verdict = verify_rule(parse_rule(wrong), np.random.default_rng(0))
        assert not verdict.ok and verdict.failed == "float"


def test_a_lora_adapter_folds_into_its_base_weight(tmp_path):
    """PEFT's lora.Linear as the dynamo exporter writes it, x@W + b + (x@A)@B * s on a 3-D batch:
    the written file has one MatMul, against W + s*A@B (an initializer). (The α search at its
    default α merges x@W and x@A into one product first and stops there.)"""
    nodes = [helper.make_node("MatMul", ["x", "W"], ["base"]), helper.make_node("Add", ["base", "b"], ["biased"]),
             helper.make_node("MatMul", ["x", "A"], ["down"]), helper.make_node("MatMul", ["down", "B"], ["up"]),
             helper.make_node("Mul", ["up", "s"], ["scaled"]), helper.make_node("Add", ["biased", "scaled"], ["y"])]
    inits = [_w("W", 32, 48, scale=0.2), _w("b", 48), _w("A", 32, 2, scale=0.2), _w("B", 2, 48, scale=0.2),
             numpy_helper.from_array(np.asarray(2.0, np.float32), "s")]
    src = _model(tmp_path / "lora.onnx", nodes, (1, 16, 32), (1, 16, 48), inits)
    ops = _optimize(tmp_path, src)
    assert ops.count("MatMul") + ops.count("Gemm") == 1 and "Mul" not in ops


def test_a_constant_scale_after_a_product_folds_into_its_weight(tmp_path):
    """(x @ W) / 8, as attention's 1/sqrt(d) or a Div after a Linear: the written file is one MatMul."""
    nodes = [helper.make_node("MatMul", ["x", "W"], ["p"]), helper.make_node("Div", ["p", "d"], ["y"])]
    inits = [_w("W", 64, 64, scale=0.1), numpy_helper.from_array(np.asarray(8.0, np.float32), "d")]
    src = _model(tmp_path / "scaled.onnx", nodes, (32, 64), (32, 64), inits)
    ops = _optimize(tmp_path, src)
    assert ops.count("MatMul") == 1 and "Mul" not in ops and "Div" not in ops


def test_a_constant_scale_after_a_convolution_folds_into_its_kernel(tmp_path):
    nodes = [helper.make_node("Conv", ["x", "K", "c"], ["p"], pads=[1, 1, 1, 1]),
             helper.make_node("Mul", ["p", "s"], ["y"])]
    inits = [_w("K", 8, 4, 3, 3, scale=0.2), _w("c", 8), numpy_helper.from_array(np.asarray(0.5, np.float32), "s")]
    src = _model(tmp_path / "conv.onnx", nodes, (1, 4, 16, 16), (1, 8, 16, 16), inits)
    ops = _optimize(tmp_path, src)
    assert ops.count("Conv") == 1 and "Mul" not in ops


def test_a_reshape_of_a_reshape_back_is_removed(tmp_path):
    """The exporter's view of a 2-D product as (1, 16, 48) read back as (16, 48): both reshapes go,
    so the ReLU fuses with the product again (onnxruntime's FusedGemm: the gain a file can hold; a
    standard file would be MatMul then Relu, no faster than the input, and the input is written)."""
    nodes = [helper.make_node("MatMul", ["x", "W"], ["p"]), helper.make_node("Reshape", ["p", "s1"], ["r1"]),
             helper.make_node("Reshape", ["r1", "s2"], ["r2"]), helper.make_node("Relu", ["r2"], ["y"])]
    inits = [_w("W", 32, 48, scale=0.2)] + [numpy_helper.from_array(np.asarray(v, np.int64), k)
                                            for k, v in (("s1", [1, 16, 48]), ("s2", [16, 48]))]
    src = _model(tmp_path / "reshapes.onnx", nodes, (16, 32), (16, 48), inits)
    assert "Reshape" not in _optimize(tmp_path, src, onnx_ops="onnxruntime")
    assert _optimize(tmp_path, src) == ["MatMul", "Reshape", "Reshape", "Relu"]


@pytest.mark.parametrize("first,second", [((0, 2, 1, 3), (0, 2, 1, 3)), ((0, 2, 3, 1), (0, 3, 1, 2))])
def test_a_transpose_and_its_inverse_are_removed(tmp_path, first, second):
    nodes = [helper.make_node("Transpose", ["x"], ["t1"], perm=list(first)),
             helper.make_node("Transpose", ["t1"], ["t2"], perm=list(second)),
             helper.make_node("Relu", ["t2"], ["y"])]
    src = _model(tmp_path / "transposes.onnx", nodes, (1, 4, 6, 8), (1, 4, 6, 8), [])
    assert "Transpose" not in _optimize(tmp_path, src)
