"""The tuner and measurer registry: a name for every tuner and every measurer, read by the CLI and
the experiments.

Adding a tuner is one row here (see CONTRIBUTING's "Add a tuner"), and so is adding a measurer. Kept apart from
:mod:`autotune.tuners`, the base layer that every tuner imports, so that no tuner imports the
registry that imports it.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

from autotune.tuners import TunerRow

TUNERS: dict[str, TunerRow] = {
    "grid": TunerRow("autotune.tuners:GridSearch"),
    "random": TunerRow("autotune.tuners:RandomSearch"),
    "triton": TunerRow("autotune.tuners:TritonAutotune"),
    "autotvm": TunerRow("autotune.autotvm:AutoTVM"),
    "autotvm-b16": TunerRow("autotune.autotvm:AutoTVM", "autotvm-b16"),
    "ansor": TunerRow("autotune.ansor:Ansor"),
    "robust": TunerRow("autotune.robust:RobustTuner"),
    "metaschedule": TunerRow("autotune.tvm.metaschedule:MetaSchedule", own_space=True),
}
"""Every tuner, each a class set by one frozen config (a preset of the class's, or its defaults):
each proposes configs through ``start(workload, seed)`` sessions (see :mod:`autotune.tuners`),
except one with ``own_space`` (MetaSchedule: TVM's schedules, the ``tvm-llvm`` target only), which
:func:`autotune.tvm.budgets.checkpoints` calls through its own method. The oracle is a bound, not a
tuner: :data:`autotune.evaluate.BOUNDS`."""
OWN_SPACE_TUNERS = tuple(name for name, row in TUNERS.items() if row.own_space)  # no sessions, no HypoGPU


def make_tuner(name: str, **overrides: Any) -> Any:
    """A new tuner called ``name`` (or an evaluation bound, :data:`autotune.evaluate.BOUNDS`) with
    ``overrides`` (config field -> value), or a clear error listing them."""
    from autotune.evaluate import BOUNDS

    row = TUNERS.get(name) or BOUNDS.get(name)
    if row is None:
        raise ValueError(f"unknown tuner {name!r}; choose from {', '.join(TUNERS)} (or the bound "
                         f"{', '.join(BOUNDS)})")
    return row.build(**overrides)

def _hypogpu(seed: int, records: str | None) -> Any:
    from autotune.measure import SimulatedMeasurer

    return SimulatedMeasurer(seed=seed, records=records)


def _cpu(seed: int, records: str | None) -> Any:
    from autotune.cpu import CpuMeasurer

    return CpuMeasurer(seed=seed, records=records)


def _tvm_llvm(seed: int, records: str | None) -> Any:
    """Real kernels: the knobs as a TIR schedule compiled by TVM for this CPU (the ``tvm`` extra)."""
    from autotune.tvm.compiled import CompiledMeasurer

    try:
        import tvm  # noqa: F401

        from autotune.tvm.target import TvmLlvmTarget
    except ImportError:
        raise ValueError("measurer tvm-llvm needs the optional extra: pip install '.[tvm]'") from None
    return CompiledMeasurer(TvmLlvmTarget(), records)


MEASURERS: dict[str, Callable[[int, str | None], Any]] = {"hypogpu": _hypogpu, "cpu": _cpu, "tvm-llvm": _tvm_llvm}
"""Every measurer: name -> (seed, records file or None) -> a :class:`autotune.measure.Measurer`.
``hypogpu`` is the simulated GPU (its hidden model can judge a tuner), ``cpu`` a Python tile loop on
this CPU; a measurer of :data:`COMPILED_MEASURERS` times compiled kernels of any workload kind and
is read at trial budgets (:func:`autotune.tvm.budgets.checkpoints`), the others time matmuls."""
COMPILED_MEASURERS = ("tvm-llvm",)  # the rows above that build and time compiled kernels


def make_measurer(name: str, seed: int = 0, records: str | None = None) -> Any:
    """A new measurer called ``name`` appending to ``records`` (when given), or a clear error listing them."""
    factory = MEASURERS.get(name)
    if factory is None:
        raise ValueError(f"unknown measurer {name!r}; choose from {', '.join(MEASURERS)}")
    return factory(seed, records)
