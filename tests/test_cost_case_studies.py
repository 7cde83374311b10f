"""the roofline model reproduces the reference case-study numbers within 0.5%."""
from __future__ import annotations

import pytest
from conftest import lora_steps, qkv_steps, resnet_steps

from eqsat.cost.roofline import cost
from eqsat.ir.evaluate import compare_graphs
from eqsat.models import build


def us(graph, device="h100") -> float:
    return cost(graph, device).total_us


def close(value: float, target: float, rel: float = 0.005) -> bool:
    return abs(value - target) <= rel * target


@pytest.mark.parametrize("step,expected", [("original", 85.55), ("fused", 62.2), ("pair", 81.6), ("merged", 57.8)])
def test_resnet_steps_h100(step, expected):
    assert close(us(resnet_steps()[step]), expected), us(resnet_steps()[step])


def test_resnet_pair_move_ratio_and_weak_penalty():
    g = resnet_steps()
    assert us(g["pair"]) / us(g["fused"]) == pytest.approx(1.31, abs=0.005)
    # the h100-best graph on the weak device is ~1.34x slower than the weak device's best (the fused one)
    assert us(g["merged"], "weak") / us(g["fused"], "weak") == pytest.approx(1.34, abs=0.01)
    assert us(g["fused"], "weak") < us(g["merged"], "weak")


@pytest.mark.parametrize("step,expected", [("original", 42.3), ("merged", 34.2)])
def test_qkv_steps_h100(step, expected):
    assert close(us(qkv_steps()[step]), expected)


def test_qkv_pair_move_ratio_depends_on_device():
    g = qkv_steps()
    # the path: pair move (worse), merge two, pair move again (worst step: ~1.11x on h100), merge three
    assert us(g["pair"]) / us(g["original"]) == pytest.approx(1.10, abs=0.005)
    assert us(g["pair2"]) / us(g["two"]) == pytest.approx(1.11, abs=0.005)
    # on the weak device the matmuls dominate and the same concat costs only ~1.017x
    assert us(g["pair2"], "weak") / us(g["two"], "weak") == pytest.approx(1.017, abs=0.002)
    assert us(g["pair"], "weak") / us(g["original"], "weak") < 1.05


@pytest.mark.parametrize("step,expected", [("original", 39.7), ("assoc", 50.5), ("merged", 21.4)])
def test_lora_steps_h100(step, expected):
    assert close(us(lora_steps()[step]), expected)


def test_lora_associativity_ratio_per_device():
    g = lora_steps()
    assert us(g["assoc"]) / us(g["original"]) == pytest.approx(1.27, abs=0.005)
    assert us(g["assoc"], "weak") / us(g["original"], "weak") == pytest.approx(1.92, abs=0.01)


def test_builders_match_hand_built_originals():
    assert us(build("resnet_block")) == pytest.approx(us(resnet_steps()["original"]))
    assert us(build("qkv")) == pytest.approx(us(qkv_steps()["original"]))
    assert us(build("lora")) == pytest.approx(us(lora_steps()["original"]))


@pytest.mark.parametrize("make,kwargs", [
    (resnet_steps, dict(n=2, c=4, hw=6)),
    (qkv_steps, dict(batch=3, d=5)),
    (lora_steps, dict(tokens=4, d=6, r=2)),
])
def test_every_step_is_numerically_equal_to_the_original(make, kwargs):
    graphs = make(**kwargs)
    for name, g in graphs.items():
        result = compare_graphs(graphs["original"], g)
        assert result.equal, (name, result)


def test_weight_only_subgraphs_are_folded_and_views_free():
    report = cost(lora_steps()["merged"], "h100")
    kinds = {r.op: r.kind for r in report.rows}
    assert kinds["ewadd"] == "folded"  # W + A·B depends only on weights
    report = cost(qkv_steps()["merged"], "h100")
    assert [r.kind for r in report.rows if r.op in ("split", "proj")] == ["view"] * 4
    assert [r.kind for r in report.rows if r.op == "concat"] == ["folded"]
