"""What a merge by need is judged by: the exact optimum of the e-graph so far, and its graph.

The parent extracts (:data:`Optimum`); the saturation worker reads its e-graph for it and marks
the answer's e-classes ``chosen`` (``EGraphRunner.mark_best``). The answer carries each node's
e-class, so the worker names an e-class the runner already named by that reference instead of
sending the node's term again (each command costs egglog 30-90 µs: NasRNN's first mark took 33 ms
with every term sent, 15 ms without).
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

from eqsat.egraph.extract import read_egraph
from eqsat.egraph.view import EGraphView
from eqsat.ir.graph import Graph, Node

Optimum = Callable[[EGraphView, list[str]], tuple[float, Graph, list[Any]]]
"""The exact extracted cost of an e-graph (its view and root lets), the graph that has it and
the e-class of each of its nodes (in ``nodes()`` order; None: a split): what merges by need are
judged by, and whose ops they pair."""


def judged(runner: Any, ask: Optimum, roots: list[str]) -> tuple[float, Graph, dict[Node, str]]:
    """A judge's answer (``ask``: :data:`Optimum` here, or a question to the parent process), with
    a reference to each of its graph's e-classes the runner named."""
    refs: dict[int, str] = {}
    cost, best, classes = ask(read_egraph(runner.egraph, runner.lang, refs=refs), roots)
    return cost, best, known_refs(best, classes, refs)


def known_refs(graph: Graph, classes: list[Any], refs: dict[int, str]) -> dict[Node, str]:
    """The best graph's nodes whose e-class a reference names: a mark need not name them again.
    By position: a graph crosses processes as its structure, rebuilt there as new nodes."""
    return {n: refs[c] for n, c in zip(graph.nodes(), classes) if c in refs}
