"""Task scheduler on the toy network, and the winner's curse."""
from __future__ import annotations

import statistics

import pytest

from autotune.ansor import Ansor
from autotune.evaluate import optimum_us
from autotune.scheduler import TaskScheduler, toy_network, winners_curse

TASKS = toy_network()


def test_toy_network_has_compute_bound_prefill_and_memory_bound_decode():
    assert len(TASKS) == 11
    by = {t.name: t for t in TASKS}
    assert all(by[n].intensity > 300 for n in ("prefill_qkv", "prefill_ffn_up", "prefill_ffn_down"))
    assert all(by[n].intensity < 40 for n in ("decode_ffn_up", "lora_a", "lora_b"))
    cost = sorted((t.weight * optimum_us(t.workload) for t in TASKS), reverse=True)
    assert sum(cost[:4]) / sum(cost) > 0.7


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    out = {}
    for strategy, similarity in (("round-robin", "all"), ("gradient", "all"), ("gradient", "intensity")):
        s = TaskScheduler(TASKS, Ansor, strategy=strategy, similarity=similarity, unit_trials=32, seed=0,
                          workdir=tmp_path_factory.mktemp(f"{strategy}-{similarity}"))
        out[(strategy, similarity)] = s.run(44)
    return out


@pytest.mark.slow  # over 30 s on 2 cores: run with -m slow
def test_all_similar_starves_the_big_tasks_intensity_similarity_does_not(runs):
    rr, grad_all, grad_int = runs[("round-robin", "all")], runs[("gradient", "all")], runs[("gradient", "intensity")]
    assert set(rr.units.values()) == {4}
    assert max(grad_all.units, key=grad_all.units.get) == "decode_ffn_up"  # chases FLOP/s it can never reach
    top = max(grad_int.units, key=grad_int.units.get)
    assert top.startswith("prefill")
    for r in runs.values():
        e2e = r.end_to_end(TASKS)
        assert 0.8 < e2e["fraction_of_optimum"] <= 1.0 and e2e["measured_ms"] < e2e["true_ms"]


@pytest.mark.slow  # over 30 s on 2 cores: run with -m slow
def test_measured_winners_are_optimistic(runs):
    rows = winners_curse(runs[("round-robin", "all")], TASKS)
    assert statistics.mean(r.optimism for r in rows) > 0.005
    assert all(r.remeasured_true_us >= optimum_us(t.workload) - 1e-9 for r, t in zip(rows, TASKS))


def test_bad_strategy_is_rejected():
    with pytest.raises(ValueError, match="strategy"):
        TaskScheduler(TASKS, Ansor, strategy="greedy")
    with pytest.raises(ValueError, match="similarity"):
        TaskScheduler(TASKS, Ansor, similarity="shape")


def test_the_scheduler_keeps_one_session_per_task_and_replays_nothing(tmp_path):
    """Each unit asks the task's open session for more configs: tuners are started once per task,
    every measurement is a fresh one, and the work is linear in the units."""
    calls = {"start": 0, "next_batch": 0}

    class Counted(Ansor):
        def start(self, workload, seed=0):
            calls["start"] += 1
            session = super().start(workload, seed)
            inner = session.next_batch

            def next_batch(n):
                calls["next_batch"] += 1
                return inner(n)

            session.next_batch = next_batch
            return session

    tasks = TASKS[:3]
    s = TaskScheduler(tasks, lambda: Counted(population=256, generations=1), strategy="round-robin",
                      unit_trials=16, seed=0, workdir=tmp_path)
    r = s.run(9)
    assert calls["start"] == s.sessions_started == 3
    assert calls["next_batch"] == 9  # one batch per unit (a unit is smaller than Ansor's batch)
    assert all(len(r.results[t.name].history) == 3 * 16 for t in tasks)
    assert sum(run.measurer.measured for run in s.runs.values()) == 9 * 16  # nothing replayed
    assert all(len((tmp_path / f"{t.name}.jsonl").read_text().splitlines()) == 48 for t in tasks)
