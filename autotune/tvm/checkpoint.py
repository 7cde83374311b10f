"""A tuner's state after a trial budget: the value :func:`autotune.tvm.budgets.checkpoints` returns and
an own-space tuner (MetaSchedule) builds itself (a module of its own, so that tuner need not import
the budgets that import the tuner registry)."""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Checkpoint:
    """A tuner's state after ``trials`` trials (``trials_run`` may be fewer when it ran out)."""

    trials: int
    trials_run: int
    tuned_us: float  # the best as the tuner measured it (inf: nothing ran)
    remeasured_us: float  # that best built and timed again by the measurer (inf: it failed)
    wall_s: float  # from the tuner's start to its last trial within the budget
    best: str  # the best schedule, readable
    errors: int  # trials that failed to build, run or match numpy
    error: str = ""  # why the re-measurement failed
    loadavg: float = 0.0  # the 1-minute load average after the re-measurement
    contended: bool = False  # the load moved during the run: the top configs were re-measured

    def as_dict(self) -> dict[str, Any]:
        finite = {k: (v if not isinstance(v, float) or math.isfinite(v) else None) for k, v in vars(self).items()}
        return finite
