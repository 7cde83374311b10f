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
