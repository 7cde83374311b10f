"""TASO's cost-based backtracking search (Algorithm 2), as the seed notes fix it.

A priority queue holds graphs by cost. Each popped graph is expanded: every
rewrite (generated rules, optionally their multi-output forms, and the pair
move) is applied at every place it matches. A new graph becomes the best if it
is cheaper, and is queued if its cost is below ``alpha`` times the best cost
*before* that update, so ``alpha = 1`` is true greedy descent. Graphs are
deduplicated by hash, graphs over ``max_ops_factor`` times the original op
count are dropped (TASO's limit); graphs that differ only by the operand order of
commutative ops count as one (they cost the same), ``budget`` counts popped graphs and
``time_limit`` bounds wall time. Costs are updated incrementally (see
:mod:`taso_baseline.rewrite`) and the best graph is checked numerically
against the input before it is returned.
"""
from __future__ import annotations

import heapq
import itertools
import time
from dataclasses import asdict, dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, Iterable, Iterator, Sequence

from tqdm import tqdm

from eqsat.cost import RooflineCost
from eqsat.devices import Device
from eqsat.evaluate import Comparison, compare_graphs
from eqsat.graph import Graph, Node
from eqsat.rules import RULES_DIR, Rule, load_rules

from .matcher import RuleIndex, compile_rules, multi_rewrites_at, rewrite_at
from .pair_move import pair_moves
from .rewrite import Expanded, State, apply_replacements, initial_state, state_key

DEFAULT_RULE_FILES = ("matrix.rules", "conv.rules", "epilogue.rules")


@lru_cache(maxsize=8)
def _load(path: str) -> tuple[Rule, ...]:
    return tuple(load_rules(path))


def default_rules(paths: Sequence[str | Path] | None = None) -> list[Rule]:
    """The shipped generated rule sets (or the given files), parsed once per process."""
    files = [Path(p) for p in paths] if paths else [RULES_DIR / f for f in DEFAULT_RULE_FILES]
    out: list[Rule] = []
    for f in files:
        out.extend(_load(str(f)))
    return out


@dataclass(frozen=True)
class Step:
    """One rewrite on the path to the best graph: the rule, the cost after it, and its ratio to the
    best cost seen on the path before it (> 1: the step made the graph worse)."""

    rule: str
    cost_us: float
    ratio_to_best: float


@dataclass(frozen=True)
class TracePoint:
    """The best cost after ``expanded`` pops, ``seconds`` into the search (recorded at every
    improvement). The search is deterministic and the budget only stops it, so the run with
    budget B is a prefix of any run with a larger budget: one trace gives every budget's answer."""

    seconds: float
    expanded: int
    best_us: float


@dataclass
class SearchResult:
    model: str
    device: str
    alpha: float
    budget: int
    original_us: float
    best_us: float
    best: Graph
    path: list[Step]
    expanded: int
    generated: int
    search_s: float
    stop: str
    verified: Comparison | None = None
    matches: dict[str, int] = field(default_factory=dict)
    trace: list[TracePoint] = field(default_factory=list)

    @property
    def speedup_pct(self) -> float:
        return 100.0 * (self.original_us / self.best_us - 1.0)

    @property
    def expanded_per_s(self) -> float:
        return self.expanded / self.search_s if self.search_s > 0 else float("inf")

    def to_dict(self) -> dict[str, Any]:
        return {
            "search": "taso", "model": self.model, "device": self.device, "alpha": self.alpha,
            "budget": self.budget, "original_us": self.original_us, "best_us": self.best_us,
            "speedup_pct": self.speedup_pct, "search_s": self.search_s, "expanded": self.expanded,
            "generated": self.generated, "expanded_per_s": self.expanded_per_s, "stop": self.stop,
            "path": [asdict(s) for s in self.path], "best_ops": self.best.op_count(),
            "verified": None if self.verified is None else asdict(self.verified),
            "top_matches": dict(sorted(self.matches.items(), key=lambda kv: -kv[1])[:20]),
            "trace": [asdict(t) for t in self.trace],
        }


def constant_only_change(old: Node, new: Node) -> bool:
    """True when ``new`` is ``old`` with only weight-only inputs re-expressed (e.g. a kernel enlarged).

    Weight-only subgraphs are folded at compile time, so such a move changes nothing but the
    folded constant's form; skipping them (and rewrites rooted in constants) keeps the queue from
    filling with near-duplicates like conv(x, enlarge(enlarge(w))).
    """
    if old.op != new.op or old.attrs != new.attrs or len(old.inputs) != len(new.inputs):
        return False
    return all(a is b or (a.is_const and b.is_const) for a, b in zip(old.inputs, new.inputs))


class Expander:
    """Produces every (rule name, replacement) of an expanded state.

    ``rewrite_constants`` also rewrites inside weight-only subgraphs (off by default: they are
    folded at compile time, see :func:`constant_only_change`).
    """

    def __init__(self, rules: Iterable[Rule], multi: bool = False, pair_move: bool = True,
                 rewrite_constants: bool = False):
        self.index = RuleIndex(compile_rules(rules, multi=multi))
        self.pair_move = pair_move
        self.rewrite_constants = rewrite_constants

    def __call__(self, ex: Expanded) -> Iterator[tuple[str, dict[Node, Node]]]:
        by_op: dict[str, list[Node]] = {}
        for n in ex.order:
            by_op.setdefault(n.op, []).append(n)
        for n in ex.order:
            if n.is_leaf or (n.is_const and not self.rewrite_constants) or len(n.shapes) != 1:
                continue
            for rw in self.index.candidates(n):
                new = rewrite_at(rw, n)
                if new is not None and (self.rewrite_constants or not constant_only_change(n, new)):
                    yield rw.name, {n: new}
            for rw in self.index.multi_by_op.get(n.op, ()):
                second = rw.source[1]
                for repl in multi_rewrites_at(rw, n, by_op.get(getattr(second, "op", ""), ())):
                    yield rw.name, repl
        if self.pair_move:
            for move in pair_moves(ex):
                yield move.name, move.replacement


def alpha_search(graph: Graph, rules: Iterable[Rule] | None = None, device: str | Device = "h100", *,
                 alpha: float = 1.05, budget: int = 1000, time_limit: float | None = None,
                 pair_move: bool = True, multi: bool = False, max_ops_factor: float = 2.0,
                 verify: bool = True, progress: bool = False, expander: Expander | None = None,
                 seed: int = 0) -> SearchResult:
    """TASO's α-backtracking search from ``graph`` (see the module docstring); ``seed`` picks the
    random inputs of the final numerical check."""
    if alpha < 1.0:
        raise ValueError(f"alpha must be >= 1, got {alpha}")
    model = RooflineCost(device)
    expand = expander or Expander(default_rules() if rules is None else rules, multi=multi, pair_move=pair_move)
    start = time.perf_counter()
    root = initial_state(graph, model)
    op_limit = max_ops_factor * root.ops
    best = root
    parent: dict[Graph, tuple[Graph | None, str, float]] = {graph: (None, "", root.cost)}
    seen: set[tuple[int, ...]] = {state_key(graph)}
    tie = itertools.count()
    heap: list[tuple[float, int, State]] = [(root.cost, next(tie), root)]
    expanded = generated = 0
    matches: dict[str, int] = {}
    stop = "queue empty"
    trace = [TracePoint(0.0, 0, root.cost)]
    bar = tqdm(total=budget, desc=f"taso α={alpha}", disable=not progress, leave=False)
    while heap:
        if expanded >= budget:
            stop = "budget"
            break
        if time_limit is not None and time.perf_counter() - start > time_limit:
            stop = "time limit"
            break
        _, _, state = heapq.heappop(heap)
        expanded += 1
        bar.update()
        ex = Expanded.of(state)
        for name, repl in expand(ex):
            matches[name] = matches.get(name, 0) + 1
            new = apply_replacements(ex, repl, model)
            key = state_key(new.graph)
            if key in seen:
                continue
            seen.add(key)
            generated += 1
            parent[new.graph] = (state.graph, name, new.cost)
            if new.ops > op_limit:
                continue
            best_before = best.cost
            if new.cost < best.cost - 1e-9:
                best = new
                trace.append(TracePoint(time.perf_counter() - start, expanded, new.cost))
            if new.cost < alpha * best_before - 1e-9:
                heapq.heappush(heap, (new.cost, next(tie), new))
    bar.close()
    elapsed = time.perf_counter() - start
    result = SearchResult(graph.name, model.device.name, alpha, budget, root.cost, best.cost, best.graph,
                          _path(parent, best.graph), expanded, generated, elapsed, stop, matches=matches,
                          trace=trace + [TracePoint(elapsed, expanded, best.cost)])
    if verify:
        result.verified = compare_graphs(graph, best.graph, trials=1, seed=seed)
        if not result.verified.equal:
            raise AssertionError(f"α search produced a graph that differs from its input: {result.verified.detail}")
    return result


def _path(parent: dict[Graph, tuple[Graph | None, str, float]], last: Graph) -> list[Step]:
    chain: list[tuple[str, float]] = []
    g: Graph | None = last
    while g is not None:
        prev, name, cost = parent[g]
        if prev is not None:
            chain.append((name, cost))
        g = prev
    chain.reverse()
    steps: list[Step] = []
    best = parent[_root(parent, last)][2]
    for name, cost in chain:
        steps.append(Step(name, cost, cost / best))
        best = min(best, cost)
    return steps


def _root(parent: dict[Graph, tuple[Graph | None, str, float]], g: Graph) -> Graph:
    while parent[g][0] is not None:
        g = parent[g][0]  # type: ignore[assignment]
    return g
