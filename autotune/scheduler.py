"""Ansor's task scheduler: which task gets the next unit of tuning time.

A network is a set of tasks (matmul workloads) with weights (how often each runs); its latency is
f = Σ w_i g_i, g_i the best time found for task i. One unit gives a task one more batch of
measurements. Strategies: round-robin, or the gradient approximation of Ansor (OSDI'20 §6): after a
round-robin warm-up, pick the task with the largest |∂f/∂t_i| where

    ∂f/∂t_i ≈ w_i (α (g_i(t) − g_i(t − Δt)) / Δt + (1 − α) min(−g_i(t) / t, β C_i / max_{k∈N(i)} V_k − g_i(t)))

(backward window Δt, optimistic forward term; C_i the task's FLOPs, V_k the best FLOP/s of a similar
task), with probability ε a random task instead. Similar tasks N(i): all matmuls ("all", the
paper's grouping for one operator type) or those within 4× of its arithmetic intensity
("intensity"). Each task keeps one tuning session (:mod:`autotune.tuners`) open for the whole
run, so a unit asks that session for ``unit_trials`` more configs: nothing is re-run or replayed,
and the scheduler's work is linear in the units.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from autotune.evaluate import optimum_us, true_us
from autotune.measure import SimulatedMeasurer
from autotune.tuners import Session, TuneResult, drive, reselect
from autotune.workload import Workload

STRATEGIES = ("round-robin", "gradient")
SIMILARITY = ("all", "intensity")


@dataclass(frozen=True)
class Task:
    name: str
    workload: Workload
    weight: int

    @property
    def intensity(self) -> float:
        """FLOPs per byte of the minimum traffic (A, B read and C written once, FP16)."""
        w = self.workload
        return w.flops / (2 * (w.M * w.K + w.K * w.N + w.M * w.N))


def toy_network() -> list[Task]:
    """The reference toy network: a 7B decoder's prefill (512 tokens, 32 layers), a decode step at
    batch 16, and LoRA adapters (rank 16) on the four attention projections."""
    h, ffn, layers, tokens, batch, rank = 4096, 11008, 32, 512, 16, 16
    return [
        Task("prefill_qkv", Workload(tokens, 3 * h, h, name="prefill_qkv"), layers),
        Task("prefill_o", Workload(tokens, h, h, name="prefill_o"), layers),
        Task("prefill_ffn_up", Workload(tokens, 2 * ffn, h, name="prefill_ffn_up"), layers),  # gate and up
        Task("prefill_ffn_down", Workload(tokens, h, ffn, name="prefill_ffn_down"), layers),
        Task("decode_qkv", Workload(batch, 3 * h, h, name="decode_qkv"), layers),
        Task("decode_o", Workload(batch, h, h, name="decode_o"), layers),
        Task("decode_ffn_up", Workload(batch, 2 * ffn, h, name="decode_ffn_up"), layers),
        Task("decode_ffn_down", Workload(batch, h, ffn, name="decode_ffn_down"), layers),
        Task("lora_a", Workload(tokens, rank, h, name="lora_a"), 4 * layers),
        Task("lora_b", Workload(tokens, h, rank, name="lora_b"), 4 * layers),
        Task("lora_merge", Workload(tokens, h, 2 * rank, name="lora_merge"), layers),
    ]


@dataclass
class ScheduleResult:
    strategy: str
    similarity: str
    units: dict[str, int]
    results: dict[str, TuneResult]
    choices: list[str] = field(default_factory=list)

    def measured_us(self, task: Task) -> float:
        return self.results[task.name].best.time_us

    def end_to_end(self, tasks: Sequence[Task]) -> dict[str, float]:
        """True latency of the chosen configs, its optimum, and the measured (optimistic) latency."""
        true = sum(t.weight * true_us(t.workload, self.results[t.name].best.config) for t in tasks)
        best = sum(t.weight * optimum_us(t.workload) for t in tasks)
        measured = sum(t.weight * self.measured_us(t) for t in tasks)
        return {"true_ms": true / 1e3, "optimum_ms": best / 1e3, "measured_ms": measured / 1e3,
                "fraction_of_optimum": best / true}


@dataclass
class TaskRun:
    """One task's open tuning session, its measurer and what it measured so far."""

    session: Session
    measurer: SimulatedMeasurer
    result: TuneResult


class TaskScheduler:
    """Hands out units of ``unit_trials`` measurements to tasks (see the module docstring);
    ``workdir``, if given, keeps one record file of measurements per task."""

    def __init__(self, tasks: Sequence[Task], make_tuner: Callable[[], object], strategy: str = "gradient",
                 similarity: str = "all", unit_trials: int = 64, alpha: float = 0.2, beta: float = 2.0,
                 backward_window: int = 3, epsilon: float = 0.05, seed: int = 0, workdir: str | Path | None = None):
        if strategy not in STRATEGIES:
            raise ValueError(f"unknown strategy {strategy!r}; choose from {', '.join(STRATEGIES)}")
        if similarity not in SIMILARITY:
            raise ValueError(f"unknown similarity {similarity!r}; choose from {', '.join(SIMILARITY)}")
        self.tasks, self.make_tuner, self.strategy, self.similarity = list(tasks), make_tuner, strategy, similarity
        self.unit_trials, self.alpha, self.beta, self.window = unit_trials, alpha, beta, backward_window
        self.epsilon, self.seed = epsilon, seed
        self.workdir = Path(workdir) if workdir else None
        self.runs: dict[str, TaskRun] = {}
        self.sessions_started = 0

    def similar(self, task: Task) -> list[Task]:
        if self.similarity == "all":
            return self.tasks
        return [t for t in self.tasks if max(t.intensity, task.intensity) <= 4 * min(t.intensity, task.intensity)]

    def _tune(self, task: Task) -> TuneResult:
        """One more unit for ``task``: its session proposes ``unit_trials`` more configs."""
        run = self.runs.get(task.name)
        if run is None:
            tuner = self.make_tuner()
            records = self.workdir / f"{task.name}.jsonl" if self.workdir else None
            run = self.runs[task.name] = TaskRun(tuner.start(task.workload, self.seed),
                                                 SimulatedMeasurer(seed=self.seed, records=records, resume=False),
                                                 TuneResult(tuner.name, task.workload))
            self.sessions_started += 1
        return drive(run.session, task.workload, len(run.result.history) + self.unit_trials, run.measurer, run.result)

    def _gradient(self, task: Task, units: int, history: list[float], best_thr: dict[str, float]) -> float:
        g = history[-1]
        back = (g - history[max(0, len(history) - 1 - self.window)]) / min(self.window, len(history) - 1) \
            if len(history) > 1 else 0.0
        v = max(best_thr[t.name] for t in self.similar(task))
        forward = min(-g / units, self.beta * task.workload.flops / v - g)
        return task.weight * (self.alpha * back + (1 - self.alpha) * forward)

    def run(self, total_units: int) -> ScheduleResult:
        rng = np.random.default_rng(self.seed)
        units = {t.name: 0 for t in self.tasks}
        results: dict[str, TuneResult] = {}
        history: dict[str, list[float]] = {t.name: [] for t in self.tasks}
        out = ScheduleResult(self.strategy, self.similarity, units, results)
        for step in range(total_units):
            if self.strategy == "round-robin" or step < len(self.tasks):
                task = self.tasks[step % len(self.tasks)]
            elif rng.random() < self.epsilon:
                task = self.tasks[int(rng.integers(len(self.tasks)))]
            else:
                thr = {t.name: t.workload.flops / history[t.name][-1] for t in self.tasks}
                grads = {t.name: self._gradient(t, units[t.name], history[t.name], thr) for t in self.tasks}
                task = next(t for t in self.tasks if t.name == min(grads, key=grads.get))  # most negative
            units[task.name] += 1
            results[task.name] = self._tune(task)
            history[task.name].append(results[task.name].best.time_us)
            out.choices.append(task.name)
        return out


@dataclass(frozen=True)
class CurseRow:
    task: str
    measured_us: float
    true_us: float
    optimism: float          # (true - measured) / true: > 0 when the measurement flattered the winner
    remeasured_true_us: float


def winners_curse(result: ScheduleResult, tasks: Sequence[Task], top_k: int = 5, repeats: int = 5,
                  seed: int = 1) -> list[CurseRow]:
    """How optimistic each task's measured best is, and the true time after re-measuring the top
    ``top_k`` finalists ``repeats`` times each and re-selecting by the mean."""
    rows = []
    for t in tasks:
        r = result.results[t.name]
        chosen = reselect(r, SimulatedMeasurer(seed=seed), top_k, repeats)
        best = r.best
        true = true_us(t.workload, best.config)
        rows.append(CurseRow(t.name, best.time_us, true, (true - best.time_us) / true, true_us(t.workload, chosen)))
    return rows
