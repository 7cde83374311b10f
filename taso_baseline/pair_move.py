"""The reference pair move: two same-type nodes reading the same input become split(concat(...)).

On its own the move makes a graph worse (an extra concat kernel), but it lets a
generated concat rule such as ``[A@B | A@C] = A@[B|C]`` merge the two ops.
Which ops can pair, and along which axis their outputs concatenate, is op
table data: ``OpSpec.merge_axes`` (matmul sharing its left operand
concatenates columns, conv sharing its input concatenates channels).
Each kind of move is checked numerically once, at small shapes, by the rule
verifier before it is used.
"""
from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from eqsat.ir.graph import Node, node, split
from eqsat.ir.ops import get_op
from eqsat.rewriting.rewrite import Expanded
from eqsat.rules.rulefile import parse_rule
from rulegen.verify import verify_rule


@dataclass(frozen=True)
class PairMove:
    name: str
    replacement: dict


_CHECKED: dict[tuple, bool] = {}


def check_signature(op: str, attrs: tuple, slot: int, axis: int) -> bool:
    """Verify (once per signature) that the move preserves values, as a two-output rule at small shapes."""
    key = (op, attrs, slot, axis)
    if key in _CHECKED:
        return _CHECKED[key]
    shown = " ".join(f":{k} {_fmt(v)}" for k, v in attrs if v is not None)
    arity = get_op(op).arity or 2
    args = [" ".join("?x" if k == slot else f"?{own}{k}" for k in range(arity)) for own in "ab"]
    y1, y2 = (f"({op} {shown} {a})" for a in args)
    cat = f"(concat :axis {axis} {y1} {y2})"
    sizes = f"[(dim {y1} {axis}) (dim {y2} {axis})]"
    text = (f"pair: {y1} {y2} => (proj :index 0 (split :axis {axis} :sizes {sizes} {cat})) "
            f"(proj :index 1 (split :axis {axis} :sizes {sizes} {cat}))")
    verdict = verify_rule(parse_rule(text), np.random.default_rng(0))  # shapes found by the verifier
    _CHECKED[key] = verdict.ok
    return verdict.ok


def _fmt(v: object) -> str:
    if isinstance(v, tuple):
        return "[" + " ".join(map(str, v)) + "]"
    return str(v)


def pair_moves(ex: Expanded) -> Iterator[PairMove]:
    """Every pair move available in an expanded state's graph."""
    for x in ex.order:
        if x.is_const:
            continue
        groups: dict[tuple, list[Node]] = {}
        for u in ex.users[x]:
            if u.is_const:
                continue
            for slot, axis in u.spec.merge_axes:
                if u.inputs[slot] is x:
                    groups.setdefault((u.op, u.attrs, slot, axis % len(u.shape)), []).append(u)
        for (op, attrs, slot, axis), members in groups.items():
            members = list(dict.fromkeys(members))
            for i in range(len(members)):
                for j in range(i + 1, len(members)):
                    y1, y2 = members[i], members[j]
                    if y1.shape[:axis] + y1.shape[axis + 1:] != y2.shape[:axis] + y2.shape[axis + 1:]:
                        continue
                    if not check_signature(op, attrs, slot, axis):
                        continue
                    cat = node("concat", y1, y2, axis=axis)
                    p0, p1 = split(cat, axis, (y1.shape[axis], y2.shape[axis]))
                    yield PairMove(f"pair-move({op})", {y1: p0, y2: p1})
