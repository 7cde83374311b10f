"""What a saturation run is given and what it reports: :class:`Limits`, :class:`Iteration`,
:class:`RunReport` and the growth forecast. Kept apart from the runner, which needs egglog, so the
process that only schedules and extracts (the parent of the saturation worker) never imports it."""
from __future__ import annotations

import math
import os
import resource
from dataclasses import dataclass, field

from eqsat.errors import EqsatError
from eqsat.graph_rewrite import GraphRewrite
from eqsat.identities import IDENTITIES


def rss_gb() -> float:
    """This process's resident memory now, in GiB (Linux: /proc; elsewhere its peak so far)."""
    try:
        with open("/proc/self/statm") as fh:
            return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**30
    except (OSError, ValueError, IndexError):
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20


class MemoryLimitError(EqsatError, MemoryError):
    """The e-graph's process passed ``Limits.memory_gb`` before it held a graph to answer with."""


def over_memory(limits: Limits) -> str:
    """The stop reason when this process is over the memory cap, else ""."""
    return over_cap(limits.memory_gb)


def over_cap(memory_gb: float) -> str:
    """The stop reason when this process's resident memory is past ``memory_gb``, else "" (the
    saturation's and the extraction's caps say it alike)."""
    used = rss_gb()
    return f"memory limit ({used:.2f} GB resident, cap {memory_gb:g} GB)" if used > memory_gb else ""


def growth(before: int, after: int) -> float:
    """How much an iteration multiplied the e-graph (at least 1): the forecast of the next
    iteration's growth. Its time is forecast to grow with the square (matches grow with the
    e-graph on both sides of a pattern); the runner and the saturation worker both use these."""
    return max(after / max(before, 1), 1.0)


@dataclass(frozen=True)
class Limits:
    """The e-graph search's settings; TENSAT's paper limits by default: 15 iterations, 50k e-nodes,
    multi-pattern rules in 1. ``extract`` is ``ilp`` (exact; its whole-e-graph proof explores at most
    ``ilp_nodes`` branch-and-bound nodes, its time is capped at ``ilp_seconds``) or ``greedy``.
    Iterations, e-nodes and solver nodes are work: a run they stop gives the same graph on a busy
    machine. ``seconds`` and ``ilp_seconds`` are the safety net; a run they cut short says so
    (:attr:`RunReport.clock`, the result's ``clock``).
    ``memory_gb`` caps the saturating process's resident memory, checked after every iteration and
    batch like the node and time caps (a run stops with the best graph so far) and while rules load:
    one egglog iteration can grow without bound, and the kernel's OOM kill loses everything.
    ``graph_rewrites`` (:mod:`eqsat.graph_rewrite`) add whole alternatives the rules cannot state
    (by default the identities with a constant 0 or 1, :mod:`eqsat.identities`)."""

    iterations: int = 15
    nodes: int = 50_000
    seconds: float = 60.0
    k_multi: int = 1
    multi_by_need: int = 2  # merge rounds by need after saturation, while each improves the optimum (0: off)
    multi_match_limit: int = 2_000  # in a by-need round, a multi-pattern rule matching more often is banned
    round_rewrites: bool = False  # a by-need round runs the rewrite rules once after its merges too
    match_limit: int | None = None  # back-off scheduler threshold per rule and iteration (None: off)
    extract: str = "ilp"
    ilp_seconds: float = 60.0
    ilp_nodes: int = 2_000  # branch-and-bound nodes of the final extraction's whole-e-graph proof (0: none)
    ilp_solver: str = "highs"  # a row of eqsat.egraph.solvers.SOLVERS
    dump_egraph: str = ""  # write the saturated e-graph with node costs here (egraph-serialize JSON)
    memory_gb: float = 4.0  # resident memory of the saturating process
    graph_rewrites: tuple[GraphRewrite, ...] = (IDENTITIES,)  # join the input's e-classes before saturation

    def __post_init__(self) -> None:
        if self.extract not in ("ilp", "greedy"):
            raise ValueError(f"extract must be ilp or greedy, got {self.extract!r}")
        from eqsat.egraph.solvers import SOLVERS

        if self.ilp_solver not in SOLVERS:
            raise ValueError(f"ilp_solver must be one of {', '.join(SOLVERS)}, got {self.ilp_solver!r}")
        if self.ilp_nodes < 0:
            raise ValueError(f"the extraction's node budget must be >= 0, got {self.ilp_nodes}")
        if self.iterations < 0 or self.nodes < 1 or self.k_multi < 0 or self.multi_by_need < 0 \
                or self.multi_match_limit < 1:
            raise ValueError(
                f"e-graph limits must be >= 0 iterations, >= 1 e-node, k_multi >= 0, multi_by_need >= 0 and "
                f"multi_match_limit >= 1; got {self.iterations} iterations, {self.nodes} e-nodes, k_multi "
                f"{self.k_multi}, multi_by_need {self.multi_by_need}, multi_match_limit {self.multi_match_limit}"
            )
        if not (self.memory_gb > 0 and math.isfinite(self.memory_gb)):
            raise ValueError(f"the e-graph memory cap must be a finite number of GB > 0, got {self.memory_gb}")
        if not (self.seconds >= 0 and math.isfinite(self.seconds)):
            raise ValueError(f"the e-graph time limit must be a finite number of seconds >= 0, got {self.seconds}")


@dataclass(frozen=True)
class Iteration:
    index: int
    enodes: int
    seconds: float
    matches: dict[str, int]
    multi: bool


@dataclass
class RunReport:
    iterations: list[Iteration] = field(default_factory=list)
    stop: str = ""
    load_s: float = 0.0  # loading the rules into egglog
    insert_s: float = 0.0  # inserting the graph (and its alternatives) into the e-graph
    rules_compiled: int = 0
    multi_compiled: int = 0
    egglog_rules: int = 0
    egglog_rules_loaded: int = 0  # those the e-graph held and those whose triggers matched (see runner._wake)
    rules_skipped: dict[str, int] = field(default_factory=dict)
    undone: bool = False  # the last by-need merge round was discarded (the answer is the e-graph before it)
    final_enodes: int | None = None  # the size of the e-graph the answer is from
    judges: int = 0  # how many times merges by need asked for the exact optimum
    final_judged: int | None = None  # the final e-graph is the one judge number k (0-based) saw, unchanged
    clock: str = ""  # what the wall clock decided in this run ("": only work limits did; the run repeats exactly)

    @property
    def enodes(self) -> int:
        if self.final_enodes is not None:
            return self.final_enodes
        return self.iterations[-1].enodes if self.iterations else 0

    def matches(self) -> dict[str, int]:
        total: dict[str, int] = {}
        for it in self.iterations:
            for k, v in it.matches.items():
                total[k] = total.get(k, 0) + v
        return total
