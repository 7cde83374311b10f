"""Rule directions compiled for matching on graphs, indexed so that matching is not quadratic.

Every usable direction of every rule becomes a :class:`Rewrite`. Single-output
rewrites are indexed by their source's root op and the ops of the root's
children (``None`` for a variable), so a node is only tried against rewrites
whose first two levels can match it. Lookup walks the keys stored for the node's op and
arity (a rule set has few), never the subsets of the node's inputs: a 25-input concat
would have 2^25.
"""
from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass

from eqsat.errors import EqsatError
from eqsat.ir.graph import Node
from eqsat.rules.pattern import App, Pattern, instantiate, match
from eqsat.rules.rulefile import Rule

Key = tuple[str, tuple[str | None, ...]]


@dataclass(frozen=True)
class Rewrite:
    """One direction of a rule: ``source`` roots rewrite to ``target`` roots."""

    name: str
    source: tuple[Pattern, ...]
    target: tuple[Pattern, ...]

    @property
    def is_multi(self) -> bool:
        return len(self.source) > 1


def _key(p: App) -> Key:
    return p.op, tuple(a.op if isinstance(a, App) else None for a in p.args)


def compile_rules(rules: Iterable[Rule], multi: bool = True) -> list[Rewrite]:
    """Every usable direction of ``rules`` (multi-output ones only when ``multi``)."""
    out = []
    for r in rules:
        if r.is_multi and not multi:
            continue
        for label, src, dst in r.directions():
            suffix = "" if label == "forward" else "~"
            out.append(Rewrite(r.name + suffix, tuple(src), tuple(dst)))
    return out


class RuleIndex:
    """Single-output rewrites by (root op, child ops); multi-output rewrites by their first root's op."""

    def __init__(self, rewrites: Sequence[Rewrite]):
        self.rewrites = list(rewrites)
        self.by_key: dict[Key, list[Rewrite]] = {}
        # the keys for each (op, arity), most specific first: the order in which the earlier
        # walk over child masks (variables last) met them, so the first match is unchanged
        self.keys_by_shape: dict[tuple[str, int], list[Key]] = {}
        self.multi_by_op: dict[str, list[Rewrite]] = {}
        for rw in self.rewrites:
            root = rw.source[0]
            assert isinstance(root, App)
            if rw.is_multi:
                self.multi_by_op.setdefault(root.op, []).append(rw)
            else:
                self.by_key.setdefault(_key(root), []).append(rw)
        for key in self.by_key:
            self.keys_by_shape.setdefault((key[0], len(key[1])), []).append(key)
        for keys in self.keys_by_shape.values():
            keys.sort(key=lambda k: tuple(c is None for c in k[1]))

    def __len__(self) -> int:
        return len(self.rewrites)

    def candidates(self, n: Node) -> Iterator[Rewrite]:
        """Single-output rewrites whose root and child ops are compatible with ``n``."""
        keys = self.keys_by_shape.get((n.op, len(n.inputs)))
        if not keys:
            return
        child_ops = [x.op for x in n.inputs]
        for key in keys:
            if all(c is None or c == op for c, op in zip(key[1], child_ops)):
                yield from self.by_key[key]


def rewrite_at(rw: Rewrite, n: Node) -> Node | None:
    """The replacement of ``n`` by single-output rewrite ``rw``, or None if it does not match,
    does not type-check, changes the shape, or changes nothing."""
    b = match(rw.source[0], n)
    if b is None:
        return None
    try:
        new = instantiate(rw.target[0], b)
    except (EqsatError, KeyError):
        return None
    if new is n or new.shapes != n.shapes:
        return None
    return new


def multi_rewrites_at(rw: Rewrite, n: Node, same_op: Sequence[Node]) -> Iterator[dict[Node, Node]]:
    """Replacements for a two-output rewrite whose first root matches ``n`` and second root
    matches another node from ``same_op``."""
    first = match(rw.source[0], n)
    if first is None:
        return
    for m in same_op:
        if m is n:
            continue
        b = match(rw.source[1], m, first)
        if b is None:
            continue
        try:
            news = [instantiate(p, b) for p in rw.target]
        except (EqsatError, KeyError):
            continue
        if any(new.shapes != old.shapes for new, old in zip(news, (n, m))):
            continue
        yield {n: news[0], m: news[1]}
