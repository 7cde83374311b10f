"""Ansor's sketch generation for matmul computations, as derivation rules over a compute description.

A computation is a small graph: a matmul (spatial i, j; reduction k) with an optional elementwise
consumer. Rules are tried from the output towards the inputs; each rule whose condition holds
derives new partial sketches (Ansor's Table 1, the subset for matmul on GPU):

* ``multi-level-tiling``: a node with data reuse gets the GPU tiling structure SSSRRSRS;
* ``tiling-with-fusion``: a node with a fusible elementwise consumer is tiled with the consumer
  fused into its write-back (the consumer needs no stage of its own);
* ``cache-write``: a node with data reuse and no fusible consumer writes through a cache stage;
* ``rfactor``: when the output is small and the reduction long, an extra sketch splits the
  reduction (split-K) and adds a second reduction kernel.

A sketch leaves every number open: its holes map to knobs of the schedule space. The rfactor
sketch owns split-K > 1; the others fix split-K = 1. The union of the sketches' spaces is the
search space of Ansor.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from autotune.space import COLUMN, KNOBS, SPACE
from autotune.workload import Workload

GPU_TILING = "SSSRRSRS"
SMALL_OUTPUT = 108 * 128 * 128  # fewer output elements than one 128x128 tile per SM: few thread blocks
LONG_REDUCTION = 8192


@dataclass(frozen=True)
class Node:
    name: str
    kind: str            # "matmul" (spatial i, j, reduction k) or "elementwise"
    inputs: tuple[str, ...]


@dataclass(frozen=True)
class Compute:
    """A matmul with an optional fused-able elementwise epilogue, as a small graph."""

    workload: Workload
    nodes: tuple[Node, ...]

    @classmethod
    def of(cls, workload: Workload) -> Compute:
        nodes = [Node("C", "matmul", ("A", "B"))]
        if workload.epilogue != "none":
            nodes.append(Node(workload.epilogue, "elementwise", ("C",)))
        return cls(workload, tuple(nodes))

    def consumers(self, name: str) -> list[Node]:
        return [n for n in self.nodes if name in n.inputs]


@dataclass(frozen=True)
class Sketch:
    """A program structure with open holes; ``fixed`` knobs are decided by the structure."""

    name: str
    steps: tuple[str, ...]
    holes: tuple[str, ...]
    fixed: tuple[tuple[str, int], ...]

    def mask(self, configs: np.ndarray) -> np.ndarray:
        """Which configs this sketch can express."""
        ok = np.ones(len(configs), dtype=bool)
        for knob, value in self.fixed:
            ok &= configs[:, COLUMN[knob]] == value
        if "split_k" in self.holes:
            ok &= configs[:, COLUMN["split_k"]] > 1
        return ok


@dataclass(frozen=True)
class State:
    steps: tuple[str, ...]
    fused: frozenset[str]
    rfactor: bool


Rule = tuple[str, Callable[[Compute, Node, State], bool], Callable[[Compute, Node, State], list[State]]]


def _has_reuse(c: Compute, n: Node, s: State) -> bool:
    return n.kind == "matmul"


def _fusible_consumer(c: Compute, n: Node) -> Node | None:
    cons = c.consumers(n.name)
    return cons[0] if len(cons) == 1 and cons[0].kind == "elementwise" else None


def _small_output_long_reduction(c: Compute, n: Node, s: State) -> bool:
    w = c.workload
    return n.kind == "matmul" and w.M * w.N <= SMALL_OUTPUT and w.K >= LONG_REDUCTION


RULES: tuple[Rule, ...] = (
    ("rfactor", _small_output_long_reduction,
     lambda c, n, s: [s, State(s.steps + (f"rfactor {n.name}.k (split-K + second reduction kernel)",), s.fused, True)]),
    ("tiling-with-fusion", lambda c, n, s: _has_reuse(c, n, s) and _fusible_consumer(c, n) is not None,
     lambda c, n, s: [State(s.steps + (f"multi-level tiling {GPU_TILING} of {n.name}, "
                                       f"{_fusible_consumer(c, n).name} fused into its write-back",),
                            s.fused | {_fusible_consumer(c, n).name}, s.rfactor)]),
    ("cache-write+multi-level-tiling", lambda c, n, s: _has_reuse(c, n, s) and _fusible_consumer(c, n) is None,
     lambda c, n, s: [State(s.steps + (f"cache write of {n.name}", f"multi-level tiling {GPU_TILING} of {n.name}"),
                            s.fused, s.rfactor)]),
)


def generate_sketches(compute: Compute) -> list[Sketch]:
    """Apply the rules from the output node towards the inputs; one sketch per derivation."""
    states = [State((), frozenset(), False)]
    for node in reversed(compute.nodes):
        nxt: list[State] = []
        for s in states:
            if node.name in s.fused:
                nxt.append(s)
                continue
            derived = [s]
            for _, cond, apply in RULES:
                derived = [d for st in derived for d in (apply(compute, node, st) if cond(compute, node, st) else [st])]
            nxt.extend(derived)
        states = nxt
    base_holes = tuple(k.name for k in KNOBS if k.name != "split_k")
    out = []
    for i, s in enumerate(states):
        holes = base_holes + (("split_k",) if s.rfactor else ())
        fixed = () if s.rfactor else (("split_k", 1),)
        out.append(Sketch(f"sketch{i}" + ("-rfactor" if s.rfactor else ""), s.steps, holes, fixed))
    return out


def sketch_space(sketches: list[Sketch], configs: np.ndarray | None = None) -> np.ndarray:
    """Flat indices of the configs any of the sketches can express."""
    configs = SPACE.all_values() if configs is None else configs
    ok = np.zeros(len(configs), dtype=bool)
    for s in sketches:
        ok |= s.mask(configs)
    return np.flatnonzero(ok)
