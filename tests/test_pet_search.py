"""PET on any model: conv layers found in a graph, transformations spliced back with their
corrections, and PET as a search that every command and the final check can run."""
from __future__ import annotations

import pytest

from eqsat.cost.roofline import RooflineCost
from eqsat.ir.evaluate import compare_graphs
from eqsat.ir.graph import Graph, input_, node, weight
from eqsat.search import run_verified
from experiments.searches import get_search
from pet.programs import ConvProblem
from pet.search import PetLimits, PetSearch
from pet.splice import conv_layers, conv_problem, replace_nodes, transformed_layer


def conv_model(h: int = 7, w: int = 7, dilation: int = 1, pad: int = 1) -> tuple[Graph, object]:
    x = input_("x", (2, 3, h, w))
    conv = node("conv2d", x, weight("w", (4, 3, 3, 3)), weight("b", (4,)), stride=(1, 1), pad=(pad, pad),
                dilation=(dilation, dilation), act="relu")
    return Graph((node("sigmoid", conv),), name="convnet"), conv


def test_conv_layers_are_the_convs_pet_can_describe():
    graph, conv = conv_model()
    assert conv_problem(conv) == ConvProblem(2, 3, 4, 7, 7, K=3, pad=1)
    grouped = node("conv2d", input_("y", (1, 4, 8, 8)), weight("g", (4, 1, 3, 3)), pad="same", groups=4)
    assert conv_problem(grouped) is None
    assert [n for n, _ in conv_layers(graph)] == [conv]


@pytest.mark.parametrize("name", ["split-W-2", "split-H-3", "split-W-4"])
def test_a_spliced_transformation_computes_the_conv_with_its_bias_and_activation(name):
    graph, conv = conv_model()
    spliced = replace_nodes(graph, {conv: transformed_layer(conv, conv_problem(conv), name)})
    assert spliced != graph and any(n.op == "concat" for n in spliced.nodes())  # the corrections are assembled
    check = compare_graphs(graph, spliced, trials=2)
    assert check.equal, check.detail


def test_without_its_corrections_a_split_differs_so_the_check_can_fail():
    graph, conv = conv_model()
    p = conv_problem(conv)
    from pet.programs import SpatialSplit
    from pet.splice import _substitute

    x_leaf, w_leaf = p.leaves()
    (program,) = _substitute(SpatialSplit("W", 2).program(p).outputs, {x_leaf: conv.inputs[0], w_leaf: conv.inputs[1]},
                             conv)
    assert not compare_graphs(graph, replace_nodes(graph, {conv: program}), trials=2).equal


def test_a_fully_equivalent_dilation_to_batch_needs_no_correction():
    graph, conv = conv_model(8, 8, dilation=2, pad=2)
    spliced = replace_nodes(graph, {conv: transformed_layer(conv, conv_problem(conv), "dilation-to-batch")})
    assert not any(n.op == "concat" for n in spliced.nodes())
    assert compare_graphs(graph, spliced, trials=2).equal


class OddWidthsAreSlow(RooflineCost):
    """A device whose conv kernels are slow on an odd output width (7): PET's splits must pay there."""

    def op_cost(self, op, attrs, in_shapes, out_shapes, is_const, dtype="bf16"):
        found = super().op_cost(op, attrs, in_shapes, out_shapes, is_const, dtype)
        if op == "conv2d" and out_shapes[0][3] == 7 and not is_const:
            return type(found)(**{**found.__dict__, "time_us": found.time_us + 100.0})
        return found


def test_pet_search_transforms_where_it_pays_and_the_result_is_verified():
    graph, _ = conv_model()
    result = run_verified(PetSearch(), graph, [], OddWidthsAreSlow("h100"), PetLimits(2, None, 8))
    assert result.work.chosen and result.best != graph
    assert result.best_us < result.original_us and result.verified.equal
    assert result.best_us == pytest.approx(OddWidthsAreSlow("h100").graph_time_us(result.best))


def test_pet_search_keeps_the_input_where_nothing_pays():
    graph, _ = conv_model()
    result = run_verified(get_search("pet"), graph, [], RooflineCost("h100"), PetLimits())
    assert result.best == graph and result.best_us == result.original_us
    assert result.stop in ("no transformation pays",) or result.stop.startswith("input kept")


def test_pet_optimize_takes_an_onnx_file_and_writes_a_checked_model(tmp_path):
    onnx = pytest.importorskip("onnx")
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper

    from experiments.cli import main

    rng = np.random.default_rng(0)
    w = numpy_helper.from_array(rng.standard_normal((4, 3, 3, 3)).astype(np.float32), "w")
    graph = helper.make_graph([helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
                               helper.make_node("Relu", ["c"], ["y"])], "conv",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 7, 7])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4, 7, 7])], [w])
    src, out, report = tmp_path / "conv.onnx", tmp_path / "conv.pet.onnx", tmp_path / "r.json"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)]), src)
    assert main(["pet", "optimize", str(src), "--out", str(out), "--json", str(report)]) == 0
    assert out.exists() and '"search": "pet"' in report.read_text()
