"""PET: partially equivalent conv transformations, boxes, Theorems 1 and 2, correction kernels."""
from __future__ import annotations

import numpy as np
import pytest

from eqsat.ir.domains import MERSENNE_31, modp
from eqsat.ir.evaluate import evaluate
from pet.programs import ConvProblem, DilationToBatch, SpatialSplit, candidates
from pet.verify import apply_corrections, correction_kernels, false_pass_rates, overhead, random_inputs, verify

NOTES = ConvProblem(N=2, C=3, O=4, H=6, W=8)


def test_split_in_two_differs_exactly_at_the_seam():
    p = ConvProblem(N=1, C=2, O=2, H=6, W=8)
    rng = np.random.default_rng(0)
    vals = {"x": rng.standard_normal((1, 2, 6, 8)), "w": rng.standard_normal((2, 2, 3, 3))}
    a = evaluate(p.original(), vals)[0]
    b = evaluate(SpatialSplit("W", 2).program(p), vals)[0]
    same = np.isclose(a, b, rtol=1e-12, atol=1e-12)[0, 0]
    assert same.sum() == 36 and same.size == 48
    assert set(np.flatnonzero(~same.all(axis=0))) == {3, 4}


def test_the_reference_region_table():
    v = verify(NOTES, SpatialSplit("W", 2))
    assert v.axis_boxes["W"]["original"] == [(0, 0), (1, 6), (7, 7)]
    assert v.axis_boxes["W"]["transformed"] == [(0, 0), (1, 2), (3, 3), (4, 4), (5, 6), (7, 7)]
    assert len(v.regions) == 18 and v.positions_checked == 66 and v.positions_total == 384
    assert len(v.non_equivalent) == 6 and {r.box[3] for r in v.non_equivalent} == {(3, 3), (4, 4)}
    assert v.prime == 2**31 - 1 and v.bound == pytest.approx((2 / (2**31 - 1)) ** 3)


def test_a_flipped_kernel_is_wrong_everywhere():
    v = verify(NOTES, SpatialSplit("W", 2, flip_kernel=True))
    assert len(v.non_equivalent) == len(v.regions) == 18


@pytest.mark.parametrize("domain", ["float", "int"])
def test_correction_restores_the_original_exactly(domain):
    v = verify(NOTES, SpatialSplit("W", 2))
    (k,) = correction_kernels(v)
    assert k.out_box[1] == (3, 4) and k.in_box[1] == (2, 5)
    rng = np.random.default_rng(1)
    if domain == "float":
        vals = {"x": rng.standard_normal((2, 3, 6, 8)), "w": rng.standard_normal((4, 3, 3, 3))}
        dom = None
    else:
        dom = modp(MERSENNE_31)
        vals = random_inputs(NOTES, rng, MERSENNE_31)
    kw = {} if dom is None else {"domain": dom}
    a = evaluate(NOTES.original(), vals, **kw)[0]
    b = evaluate(SpatialSplit("W", 2).program(NOTES), vals, **kw)[0]
    fixed = apply_corrections(NOTES, b, vals, [k], **kw)
    assert (a != b).any() and (np.asarray(a - fixed, dtype=object) == 0).all()


@pytest.mark.parametrize("width,expected", [(8, 0.25), (56, 2 / 56), (112, 2 / 112)])
def test_overhead_is_the_corrected_share(width, expected):
    v = verify(ConvProblem(1, 2, 2, 6, width), SpatialSplit("W", 2), tests=1)
    assert overhead(v, correction_kernels(v)) == pytest.approx(expected)


CASES = [
    (ConvProblem(1, 2, 2, 9, 6), SpatialSplit("H", 3)),
    (ConvProblem(1, 2, 3, 8, 8), SpatialSplit("W", 4)),
    (ConvProblem(2, 2, 2, 8, 8, stride=2), SpatialSplit("W", 2)),
    (ConvProblem(1, 2, 2, 8, 8, pad=2, dilation=2), SpatialSplit("H", 2)),
    (ConvProblem(1, 2, 2, 8, 8, pad=2, dilation=2), DilationToBatch()),
    (ConvProblem(1, 2, 2, 7, 7), SpatialSplit("W", 2)),                 # pad -> conv -> slice
    (ConvProblem(1, 2, 3, 7, 5), SpatialSplit("H", 3)),
    (ConvProblem(1, 2, 2, 7, 7, pad=2, dilation=2), SpatialSplit("W", 2)),
]


@pytest.mark.parametrize("problem,t", CASES, ids=lambda c: getattr(c, "name", None) or str(c))
def test_regions_agree_with_brute_force_at_every_position(problem, t):
    v = verify(problem, t, tests=2)
    rng = np.random.default_rng(7)
    differ = np.zeros(problem.original().outputs[0].shape, dtype=bool)
    for _ in range(2):
        vals = random_inputs(problem, rng, MERSENNE_31)
        a = evaluate(problem.original(), vals, modp(MERSENNE_31))[0]
        b = evaluate(t.program(problem), vals, modp(MERSENNE_31))[0]
        differ |= np.asarray(a != b, dtype=bool)
    bad = {r.box for r in v.non_equivalent}
    for r in v.regions:
        sl = tuple(slice(lo, hi + 1) for lo, hi in r.box)
        assert differ[sl].any() == (r.box in bad), r.box
    if isinstance(t, DilationToBatch):
        assert v.fully_equivalent
    else:  # corrected, the split program equals the original (integer-valued floats: every sum is exact)
        vals = {leaf.attr("name"): rng.integers(-4, 5, size=leaf.shape).astype(float) for leaf in problem.leaves()}
        b = evaluate(t.program(problem), vals)[0]
        fixed = apply_corrections(problem, b, vals, correction_kernels(v))
        assert np.array_equal(fixed, evaluate(problem.original(), vals)[0])


def test_generator_lists_only_shape_preserving_transformations():
    names = {t.name for t in candidates(ConvProblem(1, 2, 2, 8, 8, pad=2, dilation=2))}
    assert names == {"split-H-2", "split-H-3", "split-H-4", "split-W-2", "split-W-3", "split-W-4",  # 3: padded to 9
                     "dilation-to-batch"}
    assert {t.name for t in candidates(ConvProblem(1, 2, 2, 7, 7))} == {  # padded to 8, 9 or 8 first
        "split-H-2", "split-H-3", "split-H-4", "split-W-2", "split-W-3", "split-W-4"}
    assert candidates(ConvProblem(1, 2, 2, 7, 7, stride=2)) == []  # a padded tail must not shift strided windows


def test_small_primes_show_theorem_2_bound():
    rows = false_pass_rates(ConvProblem(1, 2, 2, 6, 8), SpatialSplit("W", 2), (0, 0, 2, 3), primes=(3, 5, 7),
                            tests=400)
    for r in rows:
        assert r.rate <= r.bound + 3 * np.sqrt(r.bound / r.tests)
    assert rows[0].rate > rows[-1].rate


def test_pet_demo_cli_json(tmp_path, capsys):
    import json

    from experiments.cli import main

    out = tmp_path / "demo.json"
    assert main(["pet", "demo", "--json", str(out)]) == 0
    data = json.loads(out.read_text())
    assert len(data["regions"]) == 18 and len(data["non_equivalent_regions"]) == 6
    assert (data["positions_checked"], data["positions_total"]) == (66, 384)
    assert data["max_abs_difference_after"] == 0.0
    assert "18 regions, 66 of 384" in capsys.readouterr().out
    assert main(["pet", "demo", "--W", "7"]) == 0  # odd width: pad -> conv -> slice
    assert "split-W-2" in capsys.readouterr().out
    assert main(["pet", "demo", "--W", "7", "--stride", "2"]) == 2  # no shape-preserving split: an error


def test_optimizer_prices_verified_options_and_keeps_the_cheapest():
    from eqsat.cost.roofline import RooflineCost
    from pet.optimizer import beam_search, layer_options, network

    layers = network("csrnet_backend", batch=2)
    opts = {o.transformation: o for o in layer_options(layers[0], 0, RooflineCost("h100"))}
    assert set(opts) == {"none", "dilation-to-batch"} | {f"split-{a}-{s}" for a in "HW" for s in (2, 3, 4)}  # 3, 4 padded
    assert opts["dilation-to-batch"].fully_equivalent and opts["dilation-to-batch"].corrections == 0
    assert not opts["split-W-2"].fully_equivalent and opts["split-W-2"].overhead == pytest.approx(4 / 14)
    start, best, _ = beam_search(layers[:2], "h100", beam_width=2)
    cheapest = sum(min(o.total_us for o in layer_options(p, i, RooflineCost("h100"))) for i, p in enumerate(layers[:2]))
    assert best.total_us == pytest.approx(cheapest) and best.total_us <= start.total_us


@pytest.mark.parametrize("axis,parts", [("N", 2), ("N", 4), ("K", 3)])
def test_matmul_split_and_concat_is_fully_equivalent(axis, parts):
    from pet.matmul import MatmulProblem, MatmulSplit, verify_matmul

    p = MatmulProblem(5, 12, 8)
    t = MatmulSplit(axis, parts)
    assert t.applies(p) and not MatmulSplit("N", 3).applies(p)
    regions, bad, checked = verify_matmul(p, t)
    assert len(regions) == 1 and bad == [] and checked == 3
    rng = np.random.default_rng(0)
    vals = {"a": rng.integers(-3, 4, (5, 12)).astype(float), "b": rng.integers(-3, 4, (12, 8)).astype(float)}
    assert np.array_equal(evaluate(p.original(), vals)[0], evaluate(t.program(p), vals)[0])
