"""Rewriting to a fixed point: apply rules forward, one match at a time, until none matches.

This is what a runtime's graph optimizer does with its fusions (onnxruntime fuses a conv and its
activation whenever it sees them), so it gives the graph the runtime would have run anyway, and
a search's gain over *that* graph is the part of its gain that is new.
"""
from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from eqsat.cost.costmodel import CostModel
from eqsat.ir.graph import Graph, Node
from eqsat.rewriting.matcher import RuleIndex, compile_rules, rewrite_at
from eqsat.rewriting.rewrite import Expanded, apply_replacements, initial_state
from eqsat.rules.rulefile import Rule


@dataclass(frozen=True)
class Fixpoint:
    """The rewritten graph, its cost, and how often each rule fired."""

    graph: Graph
    cost_us: float
    fired: dict[str, int]


def rewrite_to_fixpoint(graph: Graph, rules: Iterable[Rule], model: CostModel, max_steps: int = 100_000) -> Fixpoint:
    """Apply ``rules`` forward (never their reverse) until none matches. A rewrite is taken only
    where the consumer is the only user of every computed node it absorbs, as a runtime fusion
    requires (a fused producer that another op still reads would run twice)."""
    index = RuleIndex([rw for rw in compile_rules(rules, multi=False) if not rw.name.endswith("~")])
    state = initial_state(graph, model)
    fired: dict[str, int] = {}
    # what matches at a node depends only on the node (nodes are interned), so each node is matched
    # once; a step then only walks the graph re-checking the users condition
    matches: dict[Node, list[tuple[str, Node]]] = {}
    for _ in range(max_steps):
        ex = Expanded.of(state)
        step = next(((name, n, new) for n in ex.order if not n.is_const and len(n.shapes) == 1
                     for name, new in _matches(index, n, matches)
                     if all(len(ex.users[x]) == 1 and x not in state.graph.outputs
                            for x in n.inputs if not x.is_const and not x.is_leaf and x not in new.inputs)),
                    None)
        if step is None:
            break
        name, old, new = step
        fired[name] = fired.get(name, 0) + 1
        state = apply_replacements(ex, {old: new}, model)
    return Fixpoint(state.graph, state.cost, fired)


def _matches(index: RuleIndex, n: Node, memo: dict[Node, list[tuple[str, Node]]]) -> list[tuple[str, Node]]:
    """Every (rule, replacement) of ``n``, in index order, computed once per node."""
    found = memo.get(n)
    if found is None:
        found = memo[n] = [(rw.name, new) for rw in index.candidates(n) if (new := rewrite_at(rw, n)) is not None]
    return found
