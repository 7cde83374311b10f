"""The incremental tuner interface and the robust small-budget tuner."""
from __future__ import annotations

import numpy as np
import pytest

from autotune.evaluate import fraction_after
from autotune.measure import SimulatedMeasurer
from autotune.registry import TUNERS, make_tuner
from autotune.robust import RobustTuner, farthest_points
from autotune.tuners import TuneResult, drive
from autotune.workload import SHAPES, get_workload, random_shapes


def test_every_registered_tuner_opens_a_session():
    for name in TUNERS:
        tuner = make_tuner(name)
        if getattr(tuner, "own_space", False):  # MetaSchedule: TVM's schedules, no sessions
            with pytest.raises(ValueError, match="own schedules"):
                tuner.start(SHAPES["small"], seed=0)
            continue
        session = tuner.start(SHAPES["small"], seed=0)
        batch = session.next_batch(4)
        assert 0 < len(batch) <= 4, name
        session.update(SimulatedMeasurer(seed=0).measure(SHAPES["small"], batch))


def test_drive_in_pieces_equals_one_drive():
    """A session driven in units (as the task scheduler does) proposes what one run would."""
    w = SHAPES["wgrad"]
    whole = RobustTuner(n_estimators=20).tune(w, 64, SimulatedMeasurer(seed=1), seed=1)
    session, m = RobustTuner(n_estimators=20).start(w, 1), SimulatedMeasurer(seed=1)
    pieces = TuneResult("robust", w)
    for budget in (32, 48, 64):
        drive(session, w, budget, m, pieces)
    assert [r.config for r in pieces.history] == [r.config for r in whole.history]


def test_robust_never_repeats_a_config_and_is_seeded():
    w = get_workload("1000x3000x700")
    a = RobustTuner(n_estimators=20).tune(w, 64, SimulatedMeasurer(seed=3), seed=3)
    b = RobustTuner(n_estimators=20).tune(w, 64, SimulatedMeasurer(seed=3), seed=3)
    assert [r.config for r in a.history] == [r.config for r in b.history]
    assert len({r.config for r in a.history}) == 64
    assert all(r.ok for r in a.history)  # legal configs only


def test_robust_beats_random_at_64_trials():
    w = SHAPES["square"]
    robust = [fraction_after(RobustTuner().tune(w, 64, SimulatedMeasurer(seed=s), seed=s), 64) for s in range(2)]
    rand = [fraction_after(make_tuner("random").tune(w, 64, SimulatedMeasurer(seed=s), seed=s), 64)
            for s in range(2)]
    assert min(robust) > max(rand)


def test_farthest_points_spread_out():
    rng = np.random.default_rng(0)
    pts = np.concatenate([rng.normal(0, 0.01, (500, 2)), [[10.0, 10.0]]])
    picked = farthest_points(pts, 2, rng)
    assert 500 in picked.tolist()  # the lone far point is taken second


def test_random_shapes_are_seeded_and_not_powers_of_two():
    a, b = random_shapes(8, 5), random_shapes(8, 5)
    assert a == b and len(a) == 8
    for w in a:
        for d in (w.M, w.N, w.K):
            assert 16 <= d <= 16385 and d & (d - 1) != 0


def test_bad_settings_are_rejected():
    with pytest.raises(ValueError, match="local"):
        RobustTuner(local=2.0)
    with pytest.raises(ValueError, match="prior"):
        RobustTuner(prior="magic")


def test_analytic_estimate_is_a_useful_prior_without_the_hidden_model():
    """The estimate is built from the datasheet alone (it never imports HypoGPU) and still
    orders the legal configs roughly like the truth: that is what makes it worth correcting."""
    import ast
    import inspect

    from scipy.stats import spearmanr

    from autotune import analytic, hypogpu
    from autotune.resources import legal
    from autotune.space import SPACE

    imported = {n.module for n in ast.walk(ast.parse(inspect.getsource(analytic)))
                if isinstance(n, ast.ImportFrom)}
    assert "hypogpu" not in imported
    values = SPACE.all_values()
    values = values[legal(values)][::7]
    for shape in ("square", "wgrad", "decode"):
        w = SHAPES[shape]
        est = analytic.estimate_us(w, values)
        assert np.all(np.isfinite(est)) and np.all(est > 0)
        assert spearmanr(est, hypogpu.time_us(w, values)).correlation > 0.8, shape


def test_first_batch_measures_every_value_of_every_knob():
    """With the prior, the first batch holds the estimate's best legal config for each knob value."""
    from autotune.space import KNOBS

    session = RobustTuner().start(SHAPES["prefill"], seed=0)
    batch = session.next_batch(session.batch_size)
    assert len(batch) == 32 and len(set(batch)) == 32
    for knob in KNOBS:
        seen = {getattr(c, knob.name) for c in batch}
        legal_values = set(session.values[:, [k.name for k in KNOBS].index(knob.name)].tolist())
        assert seen == legal_values, knob.name


def test_a_batch_takes_one_tile_at_most_per_family_times():
    """The model-picked part of a batch holds at most ``per_family`` configs that differ only in
    group_m, even when the scores rank one tile's launch orders first."""
    session = RobustTuner(per_family=2).start(SHAPES["square"], seed=0)
    family = session.family
    tile = np.flatnonzero(family == family[0])
    assert len(tile) >= 4  # group_m has six values
    order = np.concatenate([tile, np.setdiff1d(np.arange(len(family)), tile)])
    picked = session._diverse(order, 16)
    assert len(picked) == 16 and np.sum(family[picked] == family[0]) == 2
    assert np.array_equal(picked[:2], tile[:2])  # the best two of that tile stay first


def test_prior_none_ranks_from_measurements_alone():
    w = SHAPES["small"]
    a = RobustTuner(prior="none", n_estimators=20).tune(w, 48, SimulatedMeasurer(seed=2), seed=2)
    b = RobustTuner(n_estimators=20).tune(w, 48, SimulatedMeasurer(seed=2), seed=2)
    assert len(a.history) == len(b.history) == 48
    assert [r.config for r in a.history[:32]] != [r.config for r in b.history[:32]]


def test_additive_members_predict_knob_effects_never_measured_together():
    """The ridge member adds up one-hot knob effects: measured configs show 1 stage faster (but
    always with 8 warps) and 4 warps faster (always with 3 stages); it predicts the never-measured
    pair 4 warps *and* 1 stage as the fastest, which trees, flat outside the data, would not."""
    from autotune.space import COLUMN

    session = RobustTuner(ridge=1e-3).start(SHAPES["square"], seed=0)
    v = session.values
    w, st = v[:, COLUMN["num_warps"]], v[:, COLUMN["num_stages"]]
    seen = np.flatnonzero(((w == 8) & np.isin(st, (1, 3))) | ((w == 4) & (st == 3)))
    effect = 0.3 * (w == 4) + 0.2 * (st == 1)
    pred = session._additive(seen, effect[seen])
    pair = (w == 4) & (st == 1)
    assert pair.any() and not np.isin(np.flatnonzero(pair), seen).any()
    assert pred[pair].mean() == pytest.approx(0.5, abs=0.02)
    assert pred[pair].mean() > pred[seen].max() - 1e-9


def test_novelty_distance_is_the_knob_distance_to_the_nearest_measured_config():
    """Kept up to date across batches, it equals a brute-force minimum of differing knobs; 0 on
    measured configs."""
    w = SHAPES["wgrad"]
    session, m = RobustTuner(n_estimators=10).start(w, 0), SimulatedMeasurer(seed=0)
    for _ in range(2):
        session.update(m.measure(w, session.next_batch(session.batch_size)))
        dist = session._distance_to_measured().copy()
    rows = np.array([session.position[i] for i in session.trials.indices])
    brute = (session.digits[:, None, :] != session.digits[rows][None, :, :]).sum(axis=2).min(axis=1)
    assert np.array_equal(dist, brute) and (dist[rows] == 0).all() and dist.max() >= 2
    with pytest.raises(ValueError, match="novelty"):
        RobustTuner(novelty=-1)


def test_local_picks_are_within_radius_knobs_of_the_best_measured_configs():
    """The local share goes to unproposed configs at most ``radius`` knobs from one of the
    ``top_measured`` fastest measurements, best-predicted first; a larger radius reaches pairs of
    knobs moved together."""
    w = SHAPES["wgrad"]
    session, m = RobustTuner(n_estimators=10, top_measured=2).start(w, 0), SimulatedMeasurer(seed=0)
    session.update(m.measure(w, session.next_batch(session.batch_size)))
    rows = np.array([session.position[i] for i in session.trials.indices])
    best = rows[np.argsort(session.trials.times)[:2]]
    mean = session.rng.normal(size=len(session.pool))
    free = session._free()
    picked = session._near_best(mean, free, 8)
    dist = (session.digits[picked][:, None, :] != session.digits[best][None, :, :]).sum(axis=2).min(axis=1)
    assert len(picked) == 8 and free[picked].all() and (dist <= 2).all() and (dist == 2).any()
    near = np.flatnonzero(free & ((session.digits[:, None, :] != session.digits[best][None]).sum(axis=2).min(axis=1)
                                  <= 2))
    assert mean[picked].min() >= np.sort(mean[near])[-8]
    with pytest.raises(ValueError, match="radius"):
        RobustTuner(radius=0)
