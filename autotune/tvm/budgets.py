"""A tuner at several trial budgets on a compiled target, each budget's best re-measured afresh.

:func:`checkpoints` is what a comparison of tuners on real kernels reads: for each budget, the
best time the tuner saw, that best re-measured by the measurer's own evaluator with every repeat
(so every tuner's best is judged by one clock), and the wall time it took to get there. A tuner of
the knob space runs once to the largest budget and is read at each; a tuner that searches its
own space (MetaSchedule) implements ``checkpoints`` itself and is called through it. When the
machine's load moved during the run (``measurer.contended``), a knob tuner's ``TOP_K`` best
configs are re-measured and the fastest re-measured one is its best: under contention the order
of the tuner's own timings is partly the load's.
"""
from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

from autotune.tvm.checkpoint import Checkpoint
from autotune.workload import Workload

TOP_K = 3  # configs re-measured per budget on a contended machine


def target_tuner(name: str, workload: Workload, measurer: Any) -> Any:
    """The tuner row ``name`` for ``measurer``'s compiled target: a knob-space tuner searches the
    target's restriction of the knobs for ``workload``; an own-space tuner (the registry's
    ``OWN_SPACE_TUNERS``) is built as it is."""
    from autotune.registry import OWN_SPACE_TUNERS, make_tuner

    if name in OWN_SPACE_TUNERS:
        return make_tuner(name)
    return make_tuner(name, space=measurer.target.space(workload))


def checkpoints(name: str, workload: Workload, budgets: Sequence[int], measurer: Any,
                seed: int = 0) -> list[Checkpoint]:
    """The tuner row ``name`` on ``workload`` read after each of ``budgets`` trials (see the
    module's docstring); an own-space tuner reads itself through its ``checkpoints`` method."""
    from autotune.registry import OWN_SPACE_TUNERS

    tuner = target_tuner(name, workload, measurer)
    if name in OWN_SPACE_TUNERS:
        return tuner.checkpoints(workload, budgets, measurer, seed)
    result = tuner.tune(workload, max(budgets), measurer, seed=seed)
    out = []
    contended = bool(measurer.contended)
    for n in sorted(budgets):
        ran = result.history[:n]
        best = result.best_after(n)
        remeasured, error, shown = float("inf"), "no config ran without error", ""
        ok = sorted((r for r in ran if r.ok), key=lambda r: r.time_us)
        top = list(dict.fromkeys(r.config for r in ok))[:TOP_K if contended else 1]
        for config in top:
            us, why = measurer.remeasure(workload, config)
            if us < remeasured or not shown:
                remeasured, error, shown = us, why, str(config)
        out.append(Checkpoint(n, len(ran), float("inf") if best is None else best.time_us, remeasured,
                              ran[-1].clock_s if ran else 0.0, shown, sum(not r.ok for r in ran), error,
                              round(os.getloadavg()[0], 2), contended))
    return out
