"""A fusion whose inner result another op reads is recomputation, and no search result keeps one.

SiLU after a conv and its BatchNormalization (EfficientNet's blocks): the e-graph fused the sigmoid
into a second copy of the conv, priced on h100 as the sigmoid kernel it replaced (both memory-bound
at the same bytes), and the written file ran 0.56-0.64x in onnxruntime."""
from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from eqsat.cost.roofline import RooflineCost
from eqsat.ir.graph import Graph, input_, node, weight
from eqsat.ir.recompute import graph_flops, recomputations, without_recomputation
from eqsat.rules.rulesets import default_rules
from eqsat.search import SearchResult, refuse_recomputation, run_verified
from experiments.searches import get_search, limits_for

C, H = 16, 112  # a 1x1 conv with bias: the e-graph's extraction took the duplicate here


def silu_after_conv_bn() -> Graph:
    x = input_("x", (1, C, H, H))
    c = node("conv2d", x, weight("w", (C, C, 1, 1)), weight("b", (C,)), pad="same")
    c = node("affine", c, weight("s", (C,)), weight("t", (C,)))
    return Graph((node("ewmul", c, node("sigmoid", c)),), name="silu")


def duplicated() -> Graph:
    """What the e-graph used to extract: the conv twice, once with the sigmoid fused."""
    x = input_("x", (1, C, H, H))
    conv = lambda **act: node("conv2d", x, weight("w", (C, C, 1, 1)), weight("b", (C,)), pad="same", **act)  # noqa: E731
    return Graph((node("ewmul", conv(), conv(act="sigmoid")),), name="silu")


def test_recomputation_is_found_and_undone_without_adding_work():
    g = duplicated()
    [r] = recomputations(g)
    assert r.fused.attr("act") == "sigmoid" and r.plain.attr("act") == "none"
    fixed = without_recomputation(g)
    assert recomputations(fixed) == [] and [n.op for n in fixed.nodes() if not n.is_leaf] == \
        ["conv2d", "sigmoid", "ewmul"]
    assert graph_flops(fixed) < graph_flops(g)
    assert without_recomputation(fixed) is fixed


def test_the_guard_unfuses_or_keeps_the_input_and_says_why():
    model = RooflineCost("h100")
    g = silu_after_conv_bn()
    bad = SearchResult("x", "silu", "h100", model.graph_time_us(g), model.graph_time_us(duplicated()),
                       duplicated(), 0.0, "done", None)
    fixed = refuse_recomputation(g, bad, model)
    assert recomputations(fixed.best) == [] and "recomputed" in fixed.stop and "unfused" in fixed.stop
    assert fixed.best_us == pytest.approx(model.graph_time_us(fixed.best))
    # when unfusing leaves nothing cheaper than the input, the input is kept
    worse = SearchResult("x", "silu", "h100", 1.0, 0.5, duplicated(), 0.0, "done", None)
    kept = refuse_recomputation(g, worse, model)
    assert kept.best is g and "input kept" in kept.stop and kept.kept.guard == "recomputation"
    assert fixed.kept is None


@pytest.mark.parametrize("search", ["eqsat", "taso"])
def test_no_search_writes_the_conv_twice_for_silu(search):
    engine = get_search(search)
    g = silu_after_conv_bn()
    r = run_verified(engine, g, default_rules(("epilogue",)), RooflineCost("h100"), limits_for(engine))
    convs = [n for n in r.best.nodes() if n.op == "conv2d"]
    assert len(convs) == 1 and r.best_us < r.original_us  # the BatchNormalization still folds
    assert graph_flops(r.best) <= graph_flops(g)


def test_an_exported_silu_block_is_written_with_one_conv(tmp_path, capsys):
    from experiments.cli import main

    rng = np.random.default_rng(0)
    vec = lambda name, lo, hi: numpy_helper.from_array(rng.uniform(lo, hi, C).astype(np.float32), name)  # noqa: E731
    w = numpy_helper.from_array((rng.standard_normal((C, C, 1, 1)) / 4).astype(np.float32), "w")
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"]),
             helper.make_node("BatchNormalization", ["c", "g", "be", "mu", "var"], ["n"], epsilon=1e-3),
             helper.make_node("Sigmoid", ["n"], ["s"]), helper.make_node("Mul", ["n", "s"], ["y"])]
    graph = helper.make_graph(nodes, "silu", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, C, H, H])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, C, H, H])],
                              [w, vec("b", -1, 1), vec("g", 0.5, 1.5), vec("be", -1, 1), vec("mu", -1, 1),
                               vec("var", 0.5, 2.0)])
    src, out = tmp_path / "silu.onnx", tmp_path / "silu.opt.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(src))
    assert main(["optimize", str(src), "--search", "eqsat", "--device", "h100", "--out", str(out)]) == 0
    text = capsys.readouterr().out
    written = [n.op_type for n in onnx.load(str(out)).graph.node if n.op_type != "Identity"]
    assert sum(op in ("Conv", "FusedConv") for op in written) == 1, (written, text)
