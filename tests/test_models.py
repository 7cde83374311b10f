"""Benchmark graph builders: structure at default sizes, evaluation at small sizes."""
from __future__ import annotations

import numpy as np
import pytest

from eqsat.cost.roofline import cost
from eqsat.ir.evaluate import evaluate_nodes, random_leaves
from eqsat.models import CASE_STUDIES, MODELS, TENSAT_SUITE, build, model_params

SMALL = {
    "resnet_block": dict(n=1, c=4, hw=8),
    "qkv": dict(batch=2, d_model=8),
    "lora": dict(tokens=4, d_model=8, rank=2),
    "bert": dict(seq=8, hidden=16, heads=4, layers=2),
    "nasrnn": dict(steps=2, hidden=8),
    "resnext50": dict(image=32),
    "nasnet_a": dict(image=32, channels=(8, 16), normal_cells=2),
    "inception_v3": dict(image=75),
    "squeezenet": dict(image=64, classes=10),
    "vgg19": dict(image=32, hidden=64, classes=10),
    "resnet50": dict(image=8),
    "resnet18_stage4": dict(batch=1, channels=4, size=5),
    "csrnet_backend": dict(batch=1, size=4),
}


def op_counts(g):
    return g.summary()["op_counts"]


def test_suite_covers_the_case_studies_and_tensat_models():
    assert set(CASE_STUDIES) | set(TENSAT_SUITE) <= set(MODELS) == set(SMALL)


@pytest.mark.parametrize("name", list(MODELS))
def test_every_node_value_has_the_shape_its_rule_predicts(name):
    g = build(name, **SMALL[name])
    vals = evaluate_nodes(g, random_leaves(g, 0))
    for n, v in vals.items():
        got = tuple(x.shape for x in v) if isinstance(v, tuple) else v.shape
        assert got == (n.shapes if isinstance(v, tuple) else n.shape), n
        if not isinstance(v, tuple):
            assert np.all(np.isfinite(v)), n


@pytest.mark.parametrize("name", list(MODELS))
def test_default_sizes_build_and_cost(name):
    g = build(name)
    for device in ("h100", "weak", "a100", "v100"):
        report = cost(g, device)
        assert report.total_us > 0
        assert report.total_us == pytest.approx(sum(r.time_us for r in report.rows))


def test_paper_structure_counts():
    sq = op_counts(build("squeezenet"))
    assert sq["conv2d"] == 26 and sq["concat"] == 8
    vgg = op_counts(build("vgg19"))
    assert vgg["conv2d"] == 16 and vgg["matmul"] == 3
    assert op_counts(build("nasrnn"))["matmul"] == 80
    bert = build("bert")
    assert op_counts(bert)["matmul"] == 8 * 6
    assert bert.leaves("input")[0].shape == (64, 1024)
    rx = build("resnext50")
    grouped = [n for n in rx.nodes() if n.op == "conv2d" and n.attr("groups") == 32]
    assert len(grouped) == 16
    assert rx.outputs[0].shape == (1, 2048, 7, 7)
    assert build("inception_v3").outputs[0].shape == (1, 2048, 1, 1)
    assert build("resnet50").outputs[0].shape == (1, 2048, 7, 7)


def test_nasrnn_initial_state_products_fold():
    report = cost(build("nasrnn"), "h100")
    folded = [r for r in report.rows if r.kind == "folded"]
    assert len([r for r in folded if r.op == "matmul"]) == 8  # step 0's h·U reads only weights


def test_unknown_model_or_parameter_is_a_clear_error():
    with pytest.raises(KeyError, match="known: resnet_block"):
        build("alexnet")
    with pytest.raises(ValueError, match="no parameter.*width"):
        build("qkv", width=3)
    assert model_params("bert") == dict(seq=64, hidden=1024, heads=16, layers=8, dtype="bf16")


def test_a_deep_graph_pickles_without_recursion():
    """Graphs go to the saturation worker by pickle; a nested pickle overflowed on deep models."""
    import pickle

    from eqsat.ir.graph import Graph, input_, node

    x = input_("x", (4, 4))
    for _ in range(3000):
        x = node("relu", x)
    g = Graph((x,), "f32", "chain")
    back = pickle.loads(pickle.dumps(g))
    assert back == g and back.name == "chain" and back.dtype == "f32"
