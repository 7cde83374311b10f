"""A graph as a JSON document: the flat node list a pickle of :class:`~eqsat.ir.graph.Graph` uses,
in a form any machine reads with the standard library alone.

Why: the GPU check searches on one machine and times on another that has PyTorch but none of the
search's dependencies (egglog, the ILP solvers); the exact graph the search chose must travel
without its weights, which the timing side draws again from the same seed. The weights that act
as attributes (:attr:`Graph.fixed`: masks, exponents) travel with it, since no draw can replace them.
"""
from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from eqsat.errors import EqsatError
from eqsat.ir.graph import Graph, Node, node

FORMAT = "eqsat-lab graph 1"


def _plain(value: Any) -> Any:
    if isinstance(value, tuple):
        return [_plain(v) for v in value]
    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, np.floating):
        return float(value)
    return value


def _attr(value: Any) -> Any:
    return tuple(_attr(v) for v in value) if isinstance(value, list) else value


def to_json(graph: Graph, fixed_limit: int | None = None) -> dict[str, Any]:
    """The graph as plain data: nodes in topological order, each ``[op, {attr: value}, [input ids]]``.
    ``fixed_limit``: fixed weights of more elements than this are left out (named in
    ``fixed_dropped``; a reader draws them like any weight): an embedding table the importer keeps
    exactly is 800 MB of JSON, and a timing needs none of its values."""
    big = {k for k, v in graph.fixed.items() if fixed_limit is not None and np.size(v) > fixed_limit}
    order = graph.nodes()
    index = {n: k for k, n in enumerate(order)}
    return {
        "format": FORMAT, "name": graph.name, "dtype": graph.dtype,
        "nodes": [[n.op, {k: _plain(v) for k, v in n.attrs}, [index[x] for x in n.inputs]] for n in order],
        "outputs": [index[o] for o in graph.outputs],
        "fixed": {k: {"dtype": str(np.asarray(v).dtype), "shape": list(np.shape(v)),
                      "values": np.asarray(v).ravel().tolist()} for k, v in graph.fixed.items() if k not in big},
        "fixed_dropped": sorted(big),
    }


def from_json(data: Mapping[str, Any], where: str = "<json>") -> Graph:
    """The graph :func:`to_json` wrote; every node is built again, so shape rules are checked."""
    if not isinstance(data, Mapping) or data.get("format") != FORMAT:
        raise EqsatError(f"{where}: not an eqsat-lab graph file (expected format {FORMAT!r})")
    built: list[Node] = []
    try:
        for op, attrs, inputs in data["nodes"]:
            if any(not 0 <= k < len(built) for k in inputs):
                raise EqsatError(f"{where}: node {len(built)} ({op}) reads a node that is not before it")
            built.append(node(op, *(built[k] for k in inputs), **{k: _attr(v) for k, v in attrs.items()}))
        outputs = tuple(built[k] for k in data["outputs"])
        fixed = {k: np.asarray(v["values"], dtype=v["dtype"]).reshape(v["shape"])
                 for k, v in data.get("fixed", {}).items()}
    except (KeyError, TypeError, ValueError, IndexError) as exc:
        raise EqsatError(f"{where}: malformed graph file ({type(exc).__name__}: {exc})") from None
    return Graph(outputs, data.get("dtype", "bf16"), data.get("name", "")).with_fixed(fixed)


def write_graph(graph: Graph, path: str | Path, fixed_limit: int | None = None) -> None:
    """Write :func:`to_json` of ``graph`` atomically."""
    from eqsat.files import write_atomic

    write_atomic(path, json.dumps(to_json(graph, fixed_limit), separators=(",", ":")))


def read_graph(path: str | Path) -> Graph:
    """The graph in the file ``path`` (:func:`from_json`)."""
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, ValueError) as exc:
        raise EqsatError(f"{path}: cannot read the graph file ({exc})") from None
    return from_json(data, str(path))
