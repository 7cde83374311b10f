"""A reference bound, not a tuner: what a perfect cost model could reach.

HypoGPU's time is a physical model times a per-config slowdown in [1, 1 + unmodeled] that no
feature can predict (a fixed pseudo-random number per shape and config, like the effects a
real compiler cannot see). :class:`ModeledOracle` knows the physical model exactly, without
that factor, and measures configs in its order through the ordinary noisy measurer, picking the
fastest measured one as every tuner does. Its curve bounds what any learned cost model can do
with the same number of measurements. It reads the hidden model, so it belongs beside the
evaluation, never inside a tuner.
"""
from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from autotune import hypogpu
from autotune.resources import legal
from autotune.space import SPACE, Space
from autotune.tuners import IncrementalTuner, ListSession, Session, configure
from autotune.workload import Workload


@dataclasses.dataclass(frozen=True)
class OracleConfig:
    """The bound's settings: the space it orders, the configs per batch, and the GPU whose model
    (without its unmodeled factor) gives the order."""

    space: Space = SPACE
    batch: int = 64
    spec: hypogpu.GPUSpec = hypogpu.A100_LIKE


class ModeledOracle(IncrementalTuner):
    """Measures legal configs in the order of HypoGPU's time without its unmodeled factor."""

    name = "oracle"

    def __init__(self, config: OracleConfig = OracleConfig(), **overrides: Any):
        configure(self, config, overrides)
        self.spec = dataclasses.replace(self.config.spec, unmodeled=0.0)

    def start(self, workload: Workload, seed: int = 0) -> Session:
        allv = self.space.all_values()
        pool = np.flatnonzero(legal(allv))
        modeled = hypogpu.time_us(workload, allv[pool], self.spec)
        order = pool[np.argsort(modeled, kind="stable")]
        return ListSession([self.space.config(int(i)) for i in order[:4096]], self.batch)
