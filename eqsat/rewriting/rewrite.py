"""Applying replacements to graphs with incremental cost and size updates.

A search state keeps its graph, cost and op count. When a state is expanded it
also gets its node order and user counts (:class:`Expanded`), once. Applying a
replacement ``{old: new}`` then rebuilds only the ancestors of the replaced
nodes, and the new cost is ``cost + price(new nodes) - price(nodes that lost
their last user)``, found by reference counting from the rewritten region:
nothing outside it is visited or re-priced. The releases start at the old output
slots: every rebuilt ancestor loses all its users, so it is freed (and frees its
inputs) unless a new node still reads it.
"""
from __future__ import annotations

import weakref
from collections.abc import Mapping
from dataclasses import dataclass, field

from eqsat.cost.roofline import CostModel
from eqsat.ir.graph import Graph, Node, combine_codes, rebuild

_CANON: weakref.WeakKeyDictionary[Node, int] = weakref.WeakKeyDictionary()


def canonical_hash(n: Node) -> int:
    """A structural hash that ignores the operand order of commutative ops (op table data), so
    graphs that differ only by commuting operands (same cost) are one search state."""
    found = _CANON.get(n)
    if found is not None:
        return found
    stack = [n]
    while stack:
        x = stack[-1]
        missing = [i for i in x.inputs if i not in _CANON]
        if missing:
            stack.extend(missing)
            continue
        stack.pop()
        if x in _CANON:
            continue
        kids = [_CANON[i] for i in x.inputs]
        if x.spec.commutative:
            kids.sort()
        h = hash(x) if not kids else combine_codes(x.op, x.attrs, kids)
        _CANON[x] = h
    return _CANON[n]


def state_key(graph: Graph) -> tuple[int, ...]:
    return tuple(canonical_hash(o) for o in graph.outputs)


def counts_as_op(n: Node) -> bool:
    """TASO's graph size counts real ops: not leaves, not views."""
    spec = n.spec
    return not spec.is_leaf and not spec.is_view


@dataclass
class State:
    """A graph in the search with its cost (µs) and op count."""

    graph: Graph
    cost: float
    ops: int


@dataclass
class Expanded:
    """What applying replacements needs about a state's graph (computed once per expansion)."""

    state: State
    order: list[Node] = field(default_factory=list)
    pos: dict[Node, int] = field(default_factory=dict)
    users: dict[Node, list[Node]] = field(default_factory=dict)
    refs: dict[Node, int] = field(default_factory=dict)  # in-edges (one per input slot) + output slots

    @classmethod
    def of(cls, state: State) -> Expanded:
        order = state.graph.nodes()
        ex = cls(state, order, {n: i for i, n in enumerate(order)}, {n: [] for n in order}, dict.fromkeys(order, 0))
        for n in order:
            for x in n.inputs:
                ex.users[x].append(n)
                ex.refs[x] += 1
        for o in state.graph.outputs:
            ex.refs[o] += 1
        return ex


def initial_state(graph: Graph, model: CostModel) -> State:
    nodes = graph.nodes()
    return State(graph, sum(model.node_time_us(n, graph.dtype) for n in nodes), sum(map(counts_as_op, nodes)))


def apply_replacements(ex: Expanded, repl: Mapping[Node, Node], model: CostModel) -> State:
    """The state after replacing every ``old`` of ``repl`` by its ``new`` node (in all users)."""
    graph = ex.state.graph
    dtype = graph.dtype
    # 1. ancestors of the replaced nodes, rebuilt in topological order
    stack = list(repl)
    affected: set[Node] = set(repl)
    while stack:
        for u in ex.users[stack.pop()]:
            if u not in affected:
                affected.add(u)
                stack.append(u)
    mapping: dict[Node, Node] = dict(repl)
    rebuilt = sorted(affected - set(repl), key=ex.pos.__getitem__)
    for x in rebuilt:
        mapping[x] = rebuild(x, tuple(mapping.get(i, i) for i in x.inputs))
    outputs = tuple(mapping.get(o, o) for o in graph.outputs)
    # 2. nodes that are new to the graph
    new: set[Node] = set()
    stack = list(mapping.values())
    while stack:
        x = stack.pop()
        if x in ex.pos or x in new:
            continue
        new.add(x)
        stack.extend(x.inputs)
    # 3. reference counting: new references first, then the removed region releases its inputs
    delta: dict[Node, int] = {}
    for m in new:
        for i in m.inputs:
            if i in ex.pos:
                delta[i] = delta.get(i, 0) + 1
    for o in outputs:
        if o in ex.pos:
            delta[o] = delta.get(o, 0) + 1
    gone: set[Node] = set()
    stack = list(graph.outputs)  # the old output slots are released; the cascade frees the old region
    while stack:
        x = stack.pop()
        d = delta.get(x, 0) - 1
        delta[x] = d
        if ex.refs[x] + d == 0 and x not in gone:
            gone.add(x)
            stack.extend(x.inputs)
    # a rebuilt ancestor costs what the node it replaces cost (same op, attributes and shapes)
    # unless its constness changed: both sides of such pairs drop out of the sums
    for x in rebuilt:
        y = mapping[x]
        if y in new and x in gone and y.is_const == x.is_const:
            new.discard(y)
            gone.discard(x)
    cost = ex.state.cost + sum(model.node_time_us(m, dtype) for m in new) \
        - sum(model.node_time_us(g, dtype) for g in gone)
    ops = ex.state.ops + sum(map(counts_as_op, new)) - sum(map(counts_as_op, gone))
    return State(Graph(outputs, dtype, graph.name), cost, ops)
