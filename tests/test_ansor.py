"""Ansor: sketch rules, random annotation, evolutionary search, ablations, partial programs."""
from __future__ import annotations

import statistics

import numpy as np
import pytest

from autotune import hypogpu
from autotune.ansor import Ansor, allowed_configs, random_annotation
from autotune.evaluate import fraction_after, optimum_us
from autotune.measure import SimulatedMeasurer
from autotune.minitriton import check
from autotune.model_quality import partial_program_quality
from autotune.registry import TUNERS
from autotune.sketch import Compute, generate_sketches, sketch_space
from autotune.space import SPACE, Config
from autotune.workload import SHAPES, Workload


def test_sketch_counts_follow_the_rules():
    square = generate_sketches(Compute.of(SHAPES["square"]))
    fused = generate_sketches(Compute.of(Workload(4096, 4096, 4096, "relu")))
    wgrad = generate_sketches(Compute.of(SHAPES["wgrad"]))
    assert (len(square), len(fused), len(wgrad)) == (1, 1, 2)
    assert any("cache write" in s for s in square[0].steps)
    assert any("relu fused" in s for s in fused[0].steps) and not any("cache write" in s for s in fused[0].steps)
    assert [("split_k" in s.holes) for s in wgrad] == [False, True]
    assert any(s.startswith("rfactor") for s in wgrad[1].steps)


def test_rfactor_sketch_programs_change_only_rounding():
    errs = [a.max_rel_error for a in check([Config(k, 32, 16, 64, 4, 2, 1) for k in (1, 4, 16)], M=96, N=80, K=2048)]
    assert all(1e-4 < e < 1e-3 for e in errs)  # FP16 output rounding (reference: 3.6e-4)


def test_union_of_sketch_spaces_is_larger_than_the_template_space_without_rfactor():
    allv = SPACE.all_values()
    wgrad = sketch_space(generate_sketches(Compute.of(SHAPES["wgrad"])), allv)
    template = sketch_space(generate_sketches(Compute.of(SHAPES["square"])), allv)  # split-K 1 only
    assert len(wgrad) == len(SPACE) > len(template) == 31_500


@pytest.mark.parametrize("shape,low,high", [("square", 20, 50), ("wgrad", 15, 40)])  # reference: 31%, 28%
def test_random_annotation_is_a_poor_start(shape, low, high):
    w = SHAPES[shape]
    sketches, pool = allowed_configs(w)
    idx = random_annotation(sketches, pool, 1000, np.random.default_rng(0))
    assert np.isin(idx, pool).all()
    pct = 100 * optimum_us(w) / hypogpu.time_us(w, SPACE.values(idx))
    assert low < np.median(pct) < high


def test_models_cannot_judge_partial_programs_well():
    rows = partial_program_quality(SHAPES["square"], train=1000, test=500)
    assert abs(rows[0].pairwise_accuracy - 0.5) < 0.05        # nothing decided: chance
    assert rows[-1].pairwise_accuracy > rows[2].pairwise_accuracy + 0.15
    assert rows[-1].recall_at_10 >= rows[1].recall_at_10


def test_ablations_limited_space_stalls_on_wgrad_full_ansor_does_not():
    w = SHAPES["wgrad"]
    full = [fraction_after(Ansor().tune(w, 256, SimulatedMeasurer(seed=s), seed=s), 256) for s in range(3)]
    limited = [fraction_after(Ansor(variant="limited").tune(w, 256, SimulatedMeasurer(seed=s), seed=s), 256)
               for s in range(3)]
    assert statistics.median(full) > 0.95 and statistics.median(limited) < 0.7  # reference: limited 56.6%


def test_every_variant_runs_on_the_common_interface():
    for variant in ("beam", "no-finetune"):
        r = TUNERS["ansor"].build(variant=variant).tune(SHAPES["small"], 96, SimulatedMeasurer(seed=1), seed=1)
        assert len(r.history) == 96 and r.best is not None and len({x.config for x in r.history}) == 96
    with pytest.raises(ValueError, match="variant"):
        Ansor(variant="greedy")
    with pytest.raises(ValueError, match="prior"):
        Ansor(prior="roofline")
    with pytest.raises(ValueError, match="novelty"):
        Ansor(novelty=-0.1)
    assert Ansor(prior="none").name == "ansor-no-prior" and Ansor(variant="beam").name == "ansor-beam"


def test_analytic_prior_scores_follow_the_datasheet_before_and_correct_it_after_measuring():
    """Without finite measurements the score is minus the log datasheet estimate; fit on measured
    programs it ranks unseen programs better than Ansor's plain throughput regression
    (Spearman correlation with the true time, wgrad)."""
    from scipy.stats import spearmanr

    from autotune.analytic import estimate_us

    w = SHAPES["wgrad"]
    sketches, pool = allowed_configs(w)
    rng = np.random.default_rng(0)
    probe = random_annotation(sketches, pool, 400, rng)
    blind = Ansor()._scorer(w, [int(probe[0])], [float("inf")])
    assert np.allclose(blind(probe), -np.log(estimate_us(w, SPACE.values(probe))))
    train = [int(i) for i in random_annotation(sketches, pool, 192, np.random.default_rng(1))]
    times = [r.time_us for r in SimulatedMeasurer(seed=0).measure(w, [SPACE.config(i) for i in train])]
    truth = hypogpu.time_us(w, SPACE.values(probe))
    rho = {p: spearmanr(-Ansor(prior=p)._scorer(w, train, times)(probe), truth)[0] for p in ("analytic", "none")}
    assert rho["analytic"] > 0.9 and rho["analytic"] > rho["none"] + 0.05  # measured: 0.97 vs 0.88


def test_experiment_cells_for_ablation_and_tuner_comparison():
    from experiments.runs.tuning import _median_rows, ansor_cell, compare_tuner_cell

    tri = compare_tuner_cell("triton", "decode", 0, (16, 64))
    assert tri["pct"]["16"] == tri["pct"]["64"] < 40  # 24 configs, measured once: 3.6x from the optimum
    a = ansor_cell("limited", "wgrad", 0, (32, 64))
    assert 0 < a["pct"]["32"] <= a["pct"]["64"] <= 100
    rows = _median_rows([tri, compare_tuner_cell("triton", "decode", 1, (16, 64))], lambda r: r["tuner"])
    assert [r["trials"] for r in rows] == [16, 64]


def test_knob_lines_move_the_best_program_one_knob_at_a_time():
    """Each knob line of an incumbent (the best measured program of a warp count) differs from it in
    exactly one knob, is legal and unvisited, and there is at most one per (program, knob)."""
    w = SHAPES["wgrad"]
    tuner = Ansor(lines=2)
    sketches, pool = allowed_configs(w)
    allowed = np.zeros(len(SPACE), dtype=bool)
    allowed[pool] = True
    measured = [int(i) for i in random_annotation(sketches, pool, 16, np.random.default_rng(0))]
    times = [float(t) for t in hypogpu.time_us(w, SPACE.values(np.array(measured)))]
    lines = tuner._knob_lines(lambda idx: -np.asarray(idx, dtype=float), allowed, measured, times, set(measured))
    order = [measured[i] for i in np.argsort(times, kind="stable")]
    warps = {}
    for i in order:  # the incumbents: the best measured program of each of two warp counts
        warps.setdefault(SPACE.config(i).num_warps, i)
    best = list(warps.values())[:2]
    assert len({SPACE.config(b).num_warps for b in best}) == 2
    assert 0 < len(lines) <= 2 * len(SPACE.sizes) and len(set(lines.tolist())) == len(lines)
    for i in lines:
        assert allowed[i] and int(i) not in measured
        diffs = [int(np.sum(SPACE.digits(int(i))[0] != SPACE.digits(b)[0])) for b in best]
        assert min(diffs) == 1
