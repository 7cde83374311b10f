"""E-graphs in the egraph-serialize JSON format, out and in, so other tools can extract from ours
and our extractors can run on theirs.

The format (as egglog writes it and extraction benchmarks read it): ``nodes`` maps a node id to
``{"op", "children": [node ids], "eclass", "cost"}`` (a child names any node of the child
e-class), and ``root_eclasses`` lists the e-classes to extract. We add ``class_data`` per e-class
(``shape``, and ``const`` for weight-only classes, which fold to no cost); readers that do not
know it ignore it, and a file without it has no weight-only classes.
"""
from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from eqsat.egraph.view import EGraphView, ENode
from eqsat.errors import EqsatError
from eqsat.files import write_atomic


class EGraphFileError(EqsatError, ValueError):
    """An egraph-serialize file this tool cannot read, with the file and the entry named."""


MAX_COST = 1e15  # a node cost above this would overflow the sum, or lose the ILP's precision (tolerance 1e-6)


def _label(n: ENode) -> str:
    if n.op == "leaf":
        return f"leaf:{n.leaf}"
    attrs = " ".join(f":{k} {v}" for k, v in n.attrs)
    return f"{n.op} {attrs}".strip()


def to_json(view: EGraphView, costs: list[float], roots: list[Any]) -> dict[str, Any]:
    """The e-graph with each e-node's cost (µs) as an egraph-serialize document."""
    first = {c: nodes[0] for c, nodes in view.classes.items()}
    return {
        "nodes": {str(i): {"op": _label(n), "children": [str(first[c]) for c in n.children],
                           "eclass": str(n.eclass), "cost": costs[i]} for i, n in enumerate(view.nodes)},
        "root_eclasses": [str(r) for r in roots],
        "class_data": {str(c): {"shape": list(view.shapes.get(c, ())), "const": c in view.const}
                       for c in view.classes},
    }


def write_json(view: EGraphView, costs: list[float], roots: list[Any], path: str | Path) -> None:
    write_atomic(path, json.dumps(to_json(view, costs, roots)) + "\n")


def from_json(data: Any, where: str = "<json>") -> tuple[EGraphView, list[float], list[Any]]:
    """An egraph-serialize document as (view, per-node costs, root e-classes); every malformed
    entry is an :class:`EGraphFileError` naming it."""
    if not isinstance(data, dict) or not isinstance(data.get("nodes"), dict):
        raise EGraphFileError(f"{where}: not an egraph-serialize file (no 'nodes' object)")
    nodes: dict[str, Any] = data["nodes"]
    roots_raw = data.get("root_eclasses")
    if not isinstance(roots_raw, list) or not roots_raw:
        raise EGraphFileError(f"{where}: 'root_eclasses' must be a non-empty list of e-class ids")
    class_of: dict[str, str] = {}
    for nid, entry in nodes.items():
        if not isinstance(entry, dict) or not isinstance(entry.get("eclass"), (str, int)):
            raise EGraphFileError(f"{where}: node {nid!r} has no 'eclass'")
        class_of[nid] = str(entry["eclass"])
    view = EGraphView()
    costs: list[float] = []
    index = {c: k for k, c in enumerate(dict.fromkeys(class_of.values()))}
    for nid, entry in nodes.items():
        children = entry.get("children", [])
        if not isinstance(children, list):
            raise EGraphFileError(f"{where}: node {nid!r}: 'children' must be a list of node ids")
        missing = [str(c) for c in children if str(c) not in class_of]
        if missing:
            raise EGraphFileError(f"{where}: node {nid!r}: child {missing[0]!r} is not a node")
        cost = entry.get("cost", 1.0)
        if isinstance(cost, bool) or not isinstance(cost, (int, float)) or not cost >= 0 or cost == math.inf:
            raise EGraphFileError(f"{where}: node {nid!r}: cost must be a finite number >= 0, got {cost!r}")
        if cost > MAX_COST:
            raise EGraphFileError(f"{where}: node {nid!r}: cost {cost!r} is too large (at most {MAX_COST:g}); "
                                  f"rescale the costs")
        op = entry.get("op", "")
        if not isinstance(op, str):
            raise EGraphFileError(f"{where}: node {nid!r}: 'op' must be a string")
        view.nodes.append(ENode(index[class_of[nid]], op, (), tuple(index[class_of[str(c)]] for c in children),
                                leaf=op[5:] if op.startswith("leaf:") else ""))
        costs.append(float(cost))
    for i, n in enumerate(view.nodes):
        view.classes.setdefault(n.eclass, []).append(i)
    extra = data.get("class_data") or {}
    if not isinstance(extra, dict):
        raise EGraphFileError(f"{where}: 'class_data' must be an object")
    for c, info in extra.items():
        if not isinstance(info, dict):
            raise EGraphFileError(f"{where}: class_data {c!r} must be an object")
        shape, const = info.get("shape", []), info.get("const", False)
        if not isinstance(shape, list) or not all(isinstance(d, int) and not isinstance(d, bool) for d in shape):
            raise EGraphFileError(f"{where}: class_data {c!r}: 'shape' must be a list of integers, got {shape!r}")
        if not isinstance(const, bool):
            raise EGraphFileError(f"{where}: class_data {c!r}: 'const' must be true or false, got {const!r}")
        if c in index:
            view.shapes[index[c]] = tuple(shape)
            if const:
                view.const.add(index[c])
    unknown = [str(r) for r in roots_raw if str(r) not in index]
    if unknown:
        raise EGraphFileError(f"{where}: root e-class {unknown[0]!r} has no node")
    return view, costs, [index[str(r)] for r in roots_raw]


def read_json(path: str | Path) -> tuple[EGraphView, list[float], list[Any]]:
    """The e-graph in the file ``path``; a file that is not one is an :class:`EGraphFileError`."""
    try:
        text = Path(path).read_text()
    except FileNotFoundError:
        raise FileNotFoundError(f"{path}: no such e-graph file") from None
    except UnicodeDecodeError:
        raise EGraphFileError(f"{path}: not a UTF-8 text file") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise EGraphFileError(f"{path}: not valid JSON ({exc})") from None
    except RecursionError:
        raise EGraphFileError(f"{path}: JSON nested too deeply to be an egraph-serialize file") from None
    except ValueError as exc:  # a 5,000-digit number: Python's int conversion limit
        raise EGraphFileError(f"{path}: a number too long to read ({str(exc).split(';')[0]})") from None
    return from_json(data, str(path))
