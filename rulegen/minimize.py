"""Rule-set minimization, Ruler's idea: keep a rule only if the rules kept so far cannot derive it.

Candidates are taken smallest and most general first. A candidate is derivable when equality
saturation with the kept rules, started from its two sides (variables as input leaves at the
shapes the verifier uses: the world's fingerprint shapes and a second, rectangular choice), makes
both sides equal within a bounded number of iterations. Candidates are checked in batches that
grow with rule size (many small rules in one e-graph, each under its own leaf names); a batch's
survivors join the kept set before the next batch. Derivability is a sufficient test only: a rule
the bounded run cannot derive is kept, so the result is never less expressive than the input up
to the iteration bound. Multi-output rules and rules with attribute variables are kept as they are.
"""
from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
from tqdm import tqdm

from eqsat.egraph.limits import Limits
from eqsat.egraph.rewrites import compile_rules
from eqsat.egraph.runner import EGraphRunner
from eqsat.errors import EqsatError
from eqsat.ir.graph import Graph, Node, input_, rebuild
from eqsat.rules.pattern import App, Pattern, attr_vars, walk
from eqsat.rules.rulefile import Rule
from rulegen.verify import Sides, sample_assignments, world_shapes
from rulegen.world import WORLDS


@dataclass(frozen=True)
class MinimizeSettings:
    """How hard to try to derive a candidate: saturation ``iterations``, per-batch ``nodes`` and
    ``seconds`` caps, shape ``assignments`` per candidate, and the batch sizes by rule size."""

    iterations: int = 3
    nodes: int = 200_000
    seconds: float = 120.0
    assignments: int = 2
    batch: Callable[[int], int] = field(default=lambda size: 100 * size)
    seed: int = 0


@dataclass(frozen=True)
class MinimizeReport:
    """What minimization kept and dropped, and why."""

    kept: tuple[Rule, ...]
    derived: tuple[str, ...]  # dropped: the kept rules derive them
    passthrough: int  # kept without a check: multi-output rules, attribute variables, no shapes
    batches: int
    seconds: float

    def summary(self) -> str:
        return (f"kept {len(self.kept)} rules ({self.passthrough} without a check), dropped {len(self.derived)} "
                f"derivable from the kept ones; {self.batches} batches in {self.seconds:.1f} s")


def rule_size(rule: Rule) -> int:
    """Ops on both sides (the candidate order: smallest first)."""
    return sum(1 for p in rule.lhs + rule.rhs for q in walk(p) if isinstance(q, App))


def _generality(rule: Rule) -> int:
    """Distinct variables (more variables: more general, checked first at equal size)."""
    return -len({v for p in rule.lhs + rule.rhs for v in _var_names(p)})


def _var_names(p: Pattern) -> set[str]:
    return {q.name for q in walk(p) if not isinstance(q, App)}


def candidate_order(rules: Sequence[Rule]) -> list[Rule]:
    return sorted(rules, key=lambda r: (rule_size(r), _generality(r), r.name))


def _checkable(rule: Rule) -> bool:
    return not rule.is_multi and not any(attr_vars(p)[0] for p in rule.lhs + rule.rhs)


def _renamed(sides: Sides, prefix: str) -> Sides:
    """The sides with every leaf renamed ``prefix + name`` (candidates share one e-graph)."""
    memo: dict[Node, Node] = {}

    def go(n: Node) -> Node:
        if n not in memo:
            if n.is_leaf:
                memo[n] = input_(prefix + n.attr("name"), n.shape)
            else:
                memo[n] = rebuild(n, tuple(go(x) for x in n.inputs))
        return memo[n]

    left, right = sides
    return tuple(go(n) for n in left), tuple(go(n) for n in right)


def _assignments(rule: Rule, settings: MinimizeSettings, index: int) -> list[Sides]:
    world = WORLDS.get(dict(rule.meta).get("world", ""))
    base, alt = world_shapes(world, rule) if world is not None else (None, None)
    found = sample_assignments(rule, np.random.default_rng((settings.seed, index)), base, alt,
                               want=settings.assignments)
    return [sides for _, sides in found]


def derivable(kept: Sequence[Rule], candidates: Sequence[tuple[Rule, list[Sides]]],
              settings: MinimizeSettings) -> list[bool]:
    """For each candidate, whether saturating its sides with ``kept`` makes them equal at every
    shape assignment (one e-graph for the whole batch)."""
    if not kept:
        return [False] * len(candidates)
    outputs: list[Node] = []
    pairs: list[list[tuple[int, int]]] = []
    for i, (_, assignments) in enumerate(candidates):
        mine = []
        for j, sides in enumerate(assignments):
            left, right = _renamed(sides, f"c{i}a{j}_")
            mine.append((len(outputs), len(outputs) + 1))
            outputs += [left[0], right[0]]
        pairs.append(mine)
    runner = EGraphRunner(compile_rules(kept, multi=False, rewrite_constants=True))
    roots = runner.insert(Graph(tuple(outputs)))
    runner.run(Limits(iterations=settings.iterations, nodes=settings.nodes, seconds=settings.seconds, k_multi=0))
    return [bool(mine) and all(runner.equal(roots[a], roots[b]) for a, b in mine) for mine in pairs]


def minimize(rules: Sequence[Rule], settings: MinimizeSettings = MinimizeSettings(),
             progress: bool = False, known: Sequence[Rule] = ()) -> MinimizeReport:
    """The rules the kept set cannot derive, in the input's order, each checked one with
    ``checked=against:N,iterations:K`` metadata (N kept rules it was checked against). ``known``
    rules (a set minimized before, e.g. at a smaller graph size) count as kept from the start;
    the report's ``kept`` holds only rules of ``rules``.

    Rules of one size are checked together against the smaller kept ones; the survivors then join
    the kept set in rounds of doubling size (most general first), the rest re-checked after each
    round, so rules of one size can derive each other too (associativity derives its variants)."""
    start = time.perf_counter()
    kept: list[Rule] = list(known)
    derived: list[str] = []
    passthrough = batches = 0
    by_size: dict[int, list[tuple[Rule, list[Sides]]]] = {}
    for i, rule in enumerate(candidate_order(rules)):
        assignments: list[Sides] = []
        if _checkable(rule):
            try:
                assignments = _assignments(rule, settings, i)
            except EqsatError:
                assignments = []
        if assignments:
            by_size.setdefault(rule_size(rule), []).append((rule, assignments))
        else:
            passthrough += 1
            kept.append(rule)
    bar = tqdm(total=sum(map(len, by_size.values())), desc="minimize", disable=not progress, leave=False)

    def check(group: list[tuple[Rule, list[Sides]]]) -> list[tuple[Rule, list[Sides]]]:
        """The members of ``group`` the kept rules do not derive (checked in batches)."""
        nonlocal batches
        left = []
        step = settings.batch(rule_size(group[0][0])) if group else 1
        for k in range(0, len(group), step):
            chunk = group[k:k + step]
            batches += 1
            for item, gone in zip(chunk, derivable(kept, chunk, settings)):
                if gone:
                    derived.append(item[0].name)
                    bar.update(1)
                else:
                    left.append(item)
        return left

    def admit(items: list[tuple[Rule, list[Sides]]]) -> None:
        note = f"against:{len(kept)},iterations:{settings.iterations}"
        kept.extend(Rule(r.name, r.lhs, r.rhs, r.bidirectional, r.meta + (("checked", note),)) for r, _ in items)
        bar.update(len(items))

    for size in sorted(by_size):
        survivors = check(by_size[size])
        take = 1
        while survivors:
            admit(survivors[:take])
            survivors = check(survivors[take:])
            take *= 2
    bar.close()
    position = {r.name: k for k, r in enumerate(rules)}
    kept = sorted(kept[len(known):], key=lambda r: position[r.name])
    return MinimizeReport(tuple(kept), tuple(derived), passthrough, batches, time.perf_counter() - start)
