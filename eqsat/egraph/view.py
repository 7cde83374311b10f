"""The frozen e-graph as plain data, shared by extraction, the exact ILP and egraph-serialize JSON."""
from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import Any


@dataclass(frozen=True)
class ENode:
    eclass: Any
    op: str
    attrs: tuple
    children: tuple
    sizes: tuple[int, ...] = ()
    leaf: str = ""


@dataclass
class EGraphView:
    """The frozen e-graph as plain data."""

    classes: dict[Any, list[int]] = field(default_factory=dict)
    nodes: list[ENode] = field(default_factory=list)
    shapes: dict[Any, tuple[int, ...]] = field(default_factory=dict)
    const: set = field(default_factory=set)
    lets: dict[str, Any] = field(default_factory=dict)

    @cached_property
    def kids(self) -> list[frozenset]:
        """Each e-node's child e-classes that are not weight-only (those fold: no choice, no cost,
        no cycle). Computed once, on first use after the view is complete; the ILP's reduction,
        program and cycle searches read it in their inner loops."""
        return [frozenset(n.children) - self.const for n in self.nodes]


def selection_cost(view: EGraphView, costs: list[float], choice: dict[Any, int], roots: list[Any]) -> float:
    """Cost of the DAG a choice induces from the roots (each reachable e-class once)."""
    seen: set = set()
    stack = list(roots)
    total = 0.0
    while stack:
        c = stack.pop()
        if c in seen:
            continue
        seen.add(c)
        i = choice[c]
        total += costs[i]
        stack.extend(view.nodes[i].children)
    return total
