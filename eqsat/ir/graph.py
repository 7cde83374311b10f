"""Tensor graphs as hash-consed terms.

A :class:`Node` is an op applied to attributes and input nodes. Nodes are
interned: building the same op on the same inputs twice returns the same
object, so equal subterms are one node, equality is identity and hashing is
O(1). Shapes are checked (and stored) when a node is built, so an ill-typed
graph cannot exist. A :class:`Graph` is a tuple of output nodes (a DAG with
sharing, never a cycle) plus the dtype its tensors are stored in.
"""
from __future__ import annotations

import hashlib
import weakref
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from eqsat.errors import ShapeError
from eqsat.ir.ops import Shape, get_op, numel

AttrItems = tuple[tuple[str, Any], ...]

_INTERN: weakref.WeakValueDictionary[tuple, Node] = weakref.WeakValueDictionary()
# a second index keyed by the attributes as the caller wrote them, so that rebuilding a node
# skips attribute validation (the hot path of rewriting and verification)
_FAST: weakref.WeakValueDictionary[tuple, Node] = weakref.WeakValueDictionary()


_MASK = (1 << 61) - 1
_CODES: dict[object, int] = {}


def _code(value: object) -> int:
    """A process-independent 61-bit code of an op name or attribute tuple (memoized)."""
    found = _CODES.get(value)
    if found is None:
        raw = hashlib.blake2b(repr(value).encode(), digest_size=8).digest()
        found = _CODES[value] = int.from_bytes(raw, "big") & _MASK
    return found


def combine_codes(op: str, items: AttrItems, child_codes: Iterable[int]) -> int:
    """Mix an op, its attributes and its children's codes into a process-independent 61-bit code."""
    h = (_code(op) * 1_000_003 + _code(items)) & _MASK
    for c in child_codes:
        h = (h * 0x100000001B3 + c) & _MASK
    return h


def _mix(op: str, items: AttrItems, inputs: tuple[Node, ...]) -> int:
    return combine_codes(op, items, (x._hash for x in inputs))


@dataclass(frozen=True, eq=False, slots=True, weakref_slot=True)
class Node:
    """One op application. Build with :func:`node`, never directly."""

    op: str
    attrs: AttrItems
    inputs: tuple[Node, ...]
    shapes: tuple[Shape, ...]
    is_const: bool
    _hash: int = field(repr=False)

    def __hash__(self) -> int:  # structural and the same in every process, so set order is reproducible
        return self._hash

    @property
    def digest(self) -> str:
        """A structural id, stable across processes and runs."""
        return f"{self._hash:016x}"

    @property
    def shape(self) -> Shape:
        """The shape of a single-output node."""
        if len(self.shapes) != 1:
            raise ShapeError(f"{self.op} has {len(self.shapes)} outputs; read one with proj")
        return self.shapes[0]

    @property
    def spec(self):
        return get_op(self.op)

    def attr(self, name: str) -> Any:
        for key, value in self.attrs:
            if key == name:
                return value
        raise KeyError(f"{self.op} has no attribute {name!r}")

    @property
    def attr_dict(self) -> dict[str, Any]:
        return dict(self.attrs)

    @property
    def is_leaf(self) -> bool:
        return not self.inputs and self.spec.is_leaf

    def __repr__(self) -> str:
        if self.is_leaf:
            return f"{self.op}({self.attr('name')}:{'x'.join(map(str, self.shape))})"
        return f"{self.op}#{self.digest[:8]}{list(self.shapes) if len(self.shapes) > 1 else self.shapes[0]}"


def node(op: str, *inputs: Node, **attrs: Any) -> Node:
    """Build (or fetch the interned) node ``op(inputs; attrs)``, checking its shape rule.

    Raises :class:`~eqsat.errors.ShapeError` / :class:`~eqsat.errors.AttributeError_`
    naming the op and the offending input or attribute.
    """
    try:
        fast_key = (op, tuple(sorted(attrs.items())), inputs)
        found = _FAST.get(fast_key)
    except TypeError:  # unhashable attribute values (lists): take the slow path
        fast_key, found = None, None
    if found is not None:
        return found
    spec = get_op(op)
    spec.check_arity(len(inputs))
    for i, x in enumerate(inputs):
        if not isinstance(x, Node):
            raise ShapeError(f"{op}: input {i} is not a Node but {type(x).__name__}")
    if spec.takes_tuple:
        in_shapes = inputs[0].shapes
    else:
        for i, x in enumerate(inputs):
            if len(x.shapes) != 1:
                raise ShapeError(f"{op}: input {i} is {x.op} with {len(x.shapes)} outputs; select one with proj")
        in_shapes = tuple(x.shapes[0] for x in inputs)
    items = spec.canonical_attrs(attrs, in_shapes)
    key = (op, items, inputs)
    found = _INTERN.get(key)
    if found is not None:
        if fast_key is not None:
            _FAST[fast_key] = found
        return found
    shapes = spec.shape(dict(items), in_shapes)
    if spec.is_leaf:
        is_const = op == "weight"
    else:
        is_const = all(x.is_const for x in inputs)
    made = Node(op, items, inputs, tuple(shapes), is_const, _mix(op, items, inputs))
    _INTERN[key] = made
    if fast_key is not None:
        _FAST[fast_key] = made
    return made


def rebuild(x: Node, inputs: tuple[Node, ...]) -> Node:
    """``x`` with its inputs replaced by nodes of the same shapes (no attribute or shape rule re-run)."""
    key = (x.op, x.attrs, inputs)
    found = _INTERN.get(key)
    if found is not None:
        return found
    for old, new in zip(x.inputs, inputs):
        if old.shapes != new.shapes:
            raise ShapeError(f"rebuild of {x.op}: input shape {new.shapes} differs from {old.shapes}")
    made = Node(x.op, x.attrs, inputs, x.shapes, all(i.is_const for i in inputs) if inputs else x.is_const,
                _mix(x.op, x.attrs, inputs))
    _INTERN[key] = made
    return made


def _graph_from_flat(flat: tuple, outputs: tuple[int, ...], dtype: str, name: str) -> Graph:
    built: list[Node] = []
    for op, attrs, inputs in flat:
        built.append(node(op, *(built[k] for k in inputs), **dict(attrs)))
    return Graph(tuple(built[k] for k in outputs), dtype, name)


# --------------------------------------------------------------------------- convenience builders
def input_(name: str, shape: Iterable[int]) -> Node:
    return node("input", name=name, shape=tuple(shape))


def weight(name: str, shape: Iterable[int]) -> Node:
    return node("weight", name=name, shape=tuple(shape))


def split(x: Node, axis: int, sizes: Iterable[int]) -> tuple[Node, ...]:
    """Split ``x`` and return one projection per part."""
    parts = node("split", x, axis=axis, sizes=tuple(sizes))
    return tuple(node("proj", parts, index=i) for i in range(len(parts.shapes)))


# --------------------------------------------------------------------------- traversal
def topo_order(roots: Iterable[Node]) -> list[Node]:
    """Every node reachable from ``roots``, inputs before users (iterative, no recursion limit)."""
    order: list[Node] = []
    seen: set[Node] = set()
    for root in roots:
        if root in seen:
            continue
        stack: list[tuple[Node, int]] = [(root, 0)]
        seen.add(root)
        while stack:
            cur, i = stack[-1]
            if i < len(cur.inputs):
                stack[-1] = (cur, i + 1)
                child = cur.inputs[i]
                if child not in seen:
                    seen.add(child)
                    stack.append((child, 0))
            else:
                stack.pop()
                order.append(cur)
    return order


def leaves_of(roots: Iterable[Node]) -> list[Node]:
    """The inputs and weights reachable from ``roots`` (topological order)."""
    return [n for n in topo_order(roots) if n.is_leaf]


@dataclass(frozen=True)
class Graph:
    """A DAG of nodes with one or more outputs, stored in ``dtype`` (for the cost model)."""

    outputs: tuple[Node, ...]
    dtype: str = "bf16"
    name: str = ""
    fixed: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)
    """Values of weights that act as attributes (an exponent, a mask, an epsilon): every numerical
    check of this graph uses them instead of random draws (set by the ONNX importer, see
    :func:`eqsat.ir.evaluate.attribute_weights`; not pickled)."""

    def __post_init__(self) -> None:
        if isinstance(self.outputs, Node):
            object.__setattr__(self, "outputs", (self.outputs,))
        else:
            object.__setattr__(self, "outputs", tuple(self.outputs))
        if not self.outputs:
            raise ValueError("a graph needs at least one output")
        for i, out in enumerate(self.outputs):
            if not isinstance(out, Node):
                raise TypeError(f"graph output {i} is not a Node but {type(out).__name__}")
            if len(out.shapes) != 1:
                raise ShapeError(f"graph output {i} is {out.op} with {len(out.shapes)} outputs; project one")

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Graph) and self.outputs == other.outputs and self.dtype == other.dtype

    def __hash__(self) -> int:
        return hash((self.outputs, self.dtype))

    def __reduce__(self) -> tuple:
        """Pickle as a flat node list: nodes nest, so the default pickle recurses once per layer
        and a deep model (BERT with 48 layers) overflows Python's stack on its way to a worker."""
        order = self.nodes()
        index = {n: k for k, n in enumerate(order)}
        flat = tuple((n.op, n.attrs, tuple(index[x] for x in n.inputs)) for n in order)
        return _graph_from_flat, (flat, tuple(index[o] for o in self.outputs), self.dtype, self.name)

    @property
    def digest(self) -> str:
        """A process-independent hash of the structure (for dedup across runs and files)."""
        text = repr((self.dtype, tuple(o.digest for o in self.outputs)))
        return hashlib.blake2b(text.encode(), digest_size=16).hexdigest()

    def nodes(self) -> list[Node]:
        """All nodes, inputs before users (a new list each call; the order is computed once per
        graph: a run asked a 30,000-node graph for it about fifty times, 0.04 s each)."""
        order = self.__dict__.get("_order")
        if order is None:
            order = topo_order(self.outputs)
            object.__setattr__(self, "_order", order)  # a graph never changes: its nodes are immutable
        return list(order)

    def __iter__(self) -> Iterator[Node]:
        return iter(self.nodes())

    def leaves(self, op: str | None = None) -> list[Node]:
        """Leaf nodes (inputs and weights), optionally only those of ``op``."""
        return [n for n in self.nodes() if n.is_leaf and (op is None or n.op == op)]

    def op_count(self) -> int:
        """Number of non-leaf, non-view ops (TASO's graph size)."""
        return sum(1 for n in self.nodes() if not n.spec.is_leaf and not n.spec.is_view)

    def with_outputs(self, outputs: Iterable[Node]) -> Graph:
        return Graph(tuple(outputs), self.dtype, self.name, self.fixed)

    def with_fixed(self, fixed: Mapping[str, Any]) -> Graph:
        """The same graph whose checks keep ``fixed`` weights' values (see :attr:`fixed`)."""
        return Graph(self.outputs, self.dtype, self.name, dict(fixed))

    def users(self) -> dict[Node, list[Node]]:
        """Map each node to the nodes that read it."""
        users: dict[Node, list[Node]] = {n: [] for n in self.nodes()}
        for n in users:
            for x in n.inputs:
                users[x].append(n)
        return users

    def to_networkx(self) -> Any:
        """A networkx view: node ids are digests, edges point from input to user with the input slot."""
        import networkx as nx  # only here: the saturation process never needs it

        g = nx.MultiDiGraph(name=self.name, dtype=self.dtype)
        for n in self.nodes():
            g.add_node(n.digest, op=n.op, attrs=dict(n.attrs), shapes=n.shapes, const=n.is_const)
            for slot, x in enumerate(n.inputs):
                g.add_edge(x.digest, n.digest, slot=slot)
        for i, out in enumerate(self.outputs):
            g.nodes[out.digest].setdefault("outputs", []).append(i)
        return g

    def to_dot(self) -> str:
        """Graphviz DOT text (no graphviz needed to produce it)."""
        lines = [f'digraph "{self.name or "graph"}" {{', "  rankdir=TB; node [shape=box, fontsize=10];"]
        ids = {n: f"n{i}" for i, n in enumerate(self.nodes())}
        for n, nid in ids.items():
            if n.is_leaf:
                label = f"{n.op} {n.attr('name')}\\n{n.shape}"
            else:
                shown = ", ".join(f"{k}={v}" for k, v in n.attrs if v not in (None, "none"))
                label = f"{n.op}{f' [{shown}]' if shown else ''}\\n{n.shapes[0] if len(n.shapes) == 1 else 'tuple'}"
            style = ', style=filled, fillcolor="#dddddd"' if n.is_const else ""
            lines.append(f'  {nid} [label="{label}"{style}];')
            for x in n.inputs:
                lines.append(f"  {ids[x]} -> {nid};")
        for i, out in enumerate(self.outputs):
            lines.append(f'  out{i} [shape=plaintext, label="out {i}"]; {ids[out]} -> out{i};')
        lines.append("}")
        return "\n".join(lines)

    def summary(self) -> dict[str, Any]:
        nodes = self.nodes()
        counts: dict[str, int] = {}
        for n in nodes:
            counts[n.op] = counts.get(n.op, 0) + 1
        return {
            "name": self.name, "dtype": self.dtype, "ops": self.op_count(),
            "inputs": sum(1 for n in nodes if n.op == "input"),
            "weights": sum(1 for n in nodes if n.op == "weight"),
            "parameters": sum(numel(n.shape) for n in nodes if n.op == "weight"),
            "op_counts": dict(sorted(counts.items())),
            "outputs": [list(o.shape) for o in self.outputs],
        }


def leaf_shapes(graph: Graph) -> Mapping[str, Shape]:
    """Name -> shape of every input and weight (names must be unique per shape)."""
    shapes: dict[str, Shape] = {}
    for leaf in graph.leaves():
        name = leaf.attr("name")
        if name in shapes and shapes[name] != leaf.shape:
            raise ShapeError(f"leaf name {name!r} is used with two shapes: {shapes[name]} and {leaf.shape}")
        shapes[name] = leaf.shape
    return shapes
