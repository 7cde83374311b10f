"""Graph-level rewrites: code that offers, for a node of a graph, whole alternative subgraphs
computing the same values (PET's transformed conv with its correction kernels).

A rule file states rewrites as patterns of a few ops; a program that code builds and verifies (a
conv split into the batch, plus the kernels that correct its seams) is no pattern. Both searches
take such rewrites through one value, :class:`GraphRewrite`, given in their limits: the e-graph
adds every alternative of the input graph as a term in its node's e-class before saturation
(extraction chooses by cost, and the rules apply to the new terms too); the α search offers each
alternative as a move beside the rule matches. A rewrite verifies what it offers; the search's
result is still checked against its input by :func:`eqsat.search.run_verified`.
"""
from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from eqsat.cost.costmodel import CostModel
from eqsat.ir.graph import Graph, Node


@dataclass(frozen=True)
class Alternative:
    """``replacement`` computes what ``node`` computes, over ``node``'s own inputs; ``name`` is the
    move's name in reports (``pet:split-W-2``), ``facts`` what the rewrite says about it;
    ``marker`` a node only this alternative adds (default the replacement), whose e-class in the
    e-graph's extraction says it was taken even after rules rewrote the rest of it."""

    node: Node
    replacement: Node
    name: str
    facts: tuple[tuple[str, Any], ...] = ()
    marker: Node | None = None

    @property
    def mark(self) -> Node:
        return self.replacement if self.marker is None else self.marker

    def inner(self) -> set[Node]:
        """The nodes the replacement adds: those between ``node``'s inputs and the replacement."""
        stop, seen, stack = set(self.node.inputs), set(), [self.replacement]
        while stack:
            n = stack.pop()
            if n in stop or n in seen:
                continue
            seen.add(n)
            stack.extend(n.inputs)
        return seen


@dataclass(frozen=True)
class GraphRewrite:
    """A named graph-level rewrite: ``at(node)`` gives the node's verified alternatives (none when
    it does not apply). ``at`` should be cheap on a node it has seen: the α search asks again for
    every graph it expands. A rewrite that depends on weights' values (``x + 0`` where the bias is
    all zeros) has ``bind``: given the search's input graph, the ``at`` that reads its
    :attr:`~eqsat.ir.graph.Graph.fixed` values (the values every numerical check keeps); the
    searches call :meth:`on` once per run."""

    name: str
    at: Callable[[Node], Sequence[Alternative]]
    bind: Callable[[Graph], Callable[[Node], Sequence[Alternative]]] | None = None

    def on(self, graph: Graph) -> GraphRewrite:
        """This rewrite for a search from ``graph`` (itself unless it reads values: then bound to them)."""
        return self if self.bind is None else GraphRewrite(self.name, self.bind(graph))

    def alternatives(self, graph: Graph) -> list[Alternative]:
        """Every alternative of ``graph``'s nodes (weight-only nodes excepted: they fold at compile time)."""
        at = self.on(graph).at
        return [a for n in graph.nodes() if not n.is_const for a in at(n)]


def offered(rewrites: Iterable[GraphRewrite], graph: Graph) -> list[Alternative]:
    """The alternatives every rewrite of ``rewrites`` offers for ``graph``, in order."""
    return [a for rw in rewrites for a in rw.alternatives(graph)]


def nothing(n: Node) -> tuple[Alternative, ...]:
    """The ``at`` of a rewrite that offers only once bound to a graph (see :attr:`GraphRewrite.bind`)."""
    return ()


@dataclass(frozen=True)
class RewritesUsed:
    """What a search did with graph-level rewrites: how many alternatives it was offered, and the
    ones its best graph took (the search says which), as report rows."""

    offered: int = 0
    chosen: tuple[dict[str, Any], ...] = ()
    closest: dict[str, Any] | None = None  # the alternative whose price comes nearest its node's, priced alone

    @classmethod
    def of(cls, alternatives: Iterable[Alternative], graph: Graph, taken: Iterable[Alternative],
           model: CostModel | None = None) -> RewritesUsed:
        """The record of ``alternatives`` offered while searching from ``graph``, ``taken`` those
        the best graph took; ``where`` names a node by its op and index among the input's nodes of
        that op. With ``model``,
        ``closest`` is the alternative with the lowest ratio of its own nodes' price to its node's
        (what says why none was taken, or by how much one paid)."""
        alts = {a.replacement: a for a in alternatives}  # one per replacement: the α search may offer it again
        by_op: dict[str, list[Node]] = {}
        for n in graph.nodes():
            by_op.setdefault(n.op, []).append(n)

        def row(a: Alternative) -> dict[str, Any]:
            same = by_op.get(a.node.op, [])
            where = f"{a.node.op} {same.index(a.node)}" if a.node in same else f"{a.node.op} (rewritten)"
            return {"rewrite": a.name, "where": where, **dict(a.facts)}

        chosen = tuple(row(a) for a in dict.fromkeys(taken))
        closest = None
        if model is not None and alts:
            priced = [(sum(model.node_time_us(n, graph.dtype) for n in a.inner()),
                       model.node_time_us(a.node, graph.dtype), a) for a in alts.values()]
            alt_us, node_us, a = min(priced, key=lambda t: t[0] / t[1] if t[1] > 0 else math.inf)
            closest = row(a) | {"alternative_us": alt_us, "node_us": node_us}
        return cls(len(alts), chosen, closest)

    def summary(self) -> str:
        return f"{len(self.chosen)} of {self.offered} graph-level alternatives taken" if self.offered else ""

    def detail_lines(self) -> list[str]:
        """One line per alternative taken, and the nearest one's price against its node's."""
        lines = [f"took {c['rewrite']} at {c['where']}" for c in self.chosen]
        if self.closest:
            c = self.closest
            lines.append(f"nearest alternative: {c['rewrite']} at {c['where']}, {c['alternative_us']:.2f} µs "
                         f"for a node of {c['node_us']:.2f} µs")
        return lines

    def to_dict(self) -> dict[str, Any]:
        if not self.offered:
            return {}
        return {"alternatives_offered": self.offered, "chosen": list(self.chosen), "closest_alternative": self.closest}
