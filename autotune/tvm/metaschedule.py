"""TVM's own tuner, MetaSchedule (``tune_tir``), as a row of the tuner table on the ``tvm-llvm`` target.

It searches TVM's schedule space, not the knob space of :mod:`autotune.space`, so it proposes no
configs: it implements :func:`autotune.tvm.budgets.checkpoints` itself. For each budget it tunes the
same TIR function for the same LLVM target and thread count as our tuners (one ``tune_tir`` run
per budget, since its search plans by the budget), with its own evolutionary search, XGBoost model
and runner, seeded; its best schedule is compiled and re-measured by the measurer's own runner,
the evaluator that re-measures our tuners' bests. Its candidates are built in the measurer's build
pool: MetaSchedule's own builder starts a fresh process pool for every batch, and each new worker
imports TVM's tensor intrinsics first, so on a busy 2-core machine most of its first batch timed
out (docs/results/tvm_llvm). It needs the ``tvm`` extra and the ``tvm-llvm`` target.
"""
from __future__ import annotations

import logging
import math
import os
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from autotune.tuners import configure
from autotune.tvm.checkpoint import Checkpoint
from autotune.tvm.compiled import Built
from autotune.workload import Workload

FAILED_S = 1e9  # MetaSchedule records a failed candidate with a run time of 1e10 s


def _build_module(mod: Any, target: Any, folder: str) -> Built:
    """One MetaSchedule candidate compiled and exported (in a build-pool worker)."""
    import tvm

    start = time.perf_counter()
    try:
        path = str(Path(tempfile.mkdtemp(dir=folder)) / "kernel.so")  # its callback deletes the folder after the run
        tvm.compile(mod, target=target).export_library(path)
        return Built(None, path, "", time.perf_counter() - start)
    except Exception as exc:  # a failed build is MetaSchedule's error record, whatever the compiler raised
        return Built(None, "", f"build error: {type(exc).__name__}: {exc}", time.perf_counter() - start)


def _pool_builder(measurer: Any, target: Any) -> Any:
    """A MetaSchedule ``Builder`` that builds in ``measurer``'s persistent build pool."""
    from tvm.ir.utils import derived_object
    from tvm.s_tir.meta_schedule.builder import BuilderResult, PyBuilder

    @derived_object
    class PoolBuilder(PyBuilder):
        def build(self, build_inputs: list[Any]) -> list[Any]:
            built = measurer.build_tasks([(_build_module, (b.mod, target, measurer.folder)) for b in build_inputs])
            return [BuilderResult(b.artifact or None, b.error or None) for b in built]

    return PoolBuilder()


@dataclass(frozen=True)
class MetaScheduleConfig:
    """MetaSchedule's settings: candidates measured per search round (``num_trials_per_iter``, at
    most the budget) and TVM's cost model by name (``"xgb"``: its XGBoost model)."""

    trials_per_round: int = 64
    cost_model: str = "xgb"


class MetaSchedule:
    """``tune_tir`` at each budget, its best re-measured by the measurer (see the module's docstring)."""

    name = "metaschedule"
    own_space = True  # searches TVM's schedules, not the knob space: no sessions, no configs

    def __init__(self, config: MetaScheduleConfig = MetaScheduleConfig(), **overrides: Any):
        configure(self, config, overrides)

    def start(self, workload: Workload, seed: int = 0) -> Any:
        raise ValueError("metaschedule searches TVM's own schedules, not the knob space: run it with "
                         "eqsat-lab experiment tvm-llvm")

    def tune(self, workload: Workload, n_trials: int, measurer: Any, seed: int = 0) -> Any:
        return self.start(workload, seed)

    def checkpoints(self, workload: Workload, budgets: Sequence[int], measurer: Any,
                    seed: int = 0) -> list[Checkpoint]:
        target = getattr(measurer, "target", None)
        if not hasattr(target, "function"):
            raise ValueError("metaschedule needs the tvm-llvm target (TVM compiles its schedules)")
        try:
            import tvm
            import tvm.s_tir.meta_schedule as ms
        except ImportError:
            raise ValueError("metaschedule needs the optional extra: pip install '.[tvm]'") from None
        os.environ["TVM_NUM_THREADS"] = str(target.threads)  # its runner's workers inherit it
        logging.getLogger("tvm.s_tir.meta_schedule").setLevel(logging.WARNING)
        mod, llvm = target.function(workload), target.llvm()
        out = []
        for n in sorted(budgets):
            with tempfile.TemporaryDirectory(prefix="metaschedule-") as work:
                start = time.perf_counter()
                db = ms.tune_tir(mod, llvm, work, max_trials_global=n,
                                 num_trials_per_iter=min(n, self.trials_per_round),
                                 builder=_pool_builder(measurer, llvm), runner=ms.runner.LocalRunner(timeout_sec=60),
                                 cost_model=self.cost_model, seed=seed, num_tuning_cores=measurer.build_workers)
                wall = time.perf_counter() - start
                runs = [sum(float(x) for x in r.run_secs) / len(r.run_secs) if r.run_secs else math.inf
                        for r in db.get_all_tuning_records()]
                ok = [t for t in runs if t < FAILED_S]
                best, remeasured, error = "", math.inf, "no candidate ran without error"
                if ok:
                    sch = ms.tir_integration.compile_tir(db, mod, llvm)
                    path = str(Path(measurer.folder) / f"metaschedule-{workload.key}-{n}.so")
                    tvm.compile(sch.mod, target=llvm).export_library(path)
                    remeasured, error = measurer.time_artifact(workload, path)
                    best = f"MetaSchedule's best of {len(ok)}"
                out.append(Checkpoint(n, len(runs), min(ok, default=math.inf) * 1e6, remeasured, wall, best,
                                      len(runs) - len(ok), error, round(os.getloadavg()[0], 2)))
        return out
