"""Known rules applied at the root of new terms, against a saturated e-graph of their arguments.

The second step of :mod:`.novelty` at k = 4. Every argument of a four-op graph is a smaller term,
and the smaller terms have already been saturated together in egglog; what is left to find is
which four-op graphs the rules make equal *at their root*. Putting the root names back into
egglog (hundreds of thousands at k = 4) makes every iteration grow the e-graph (every new node
matches associativity, commutativity and distributivity), which does not scale (measured in
docs/results/README.md, rule generation); here the e-graph is frozen
(:class:`~eqsat.egraph.view.EGraphView`) and each rule direction is e-matched at a name's root in
Python, with its argument patterns matched against the frozen e-classes. A right side is kept only
when every sub-term below its root already has an e-class (a hash-cons lookup, so it is well typed)
and its root type-checks by the op table's shape rule; it then names a term (an e-class, or a new
root name), and the two are joined in a union-find. ``rounds`` rewrites the new names again.

Nothing is joined that the rules do not prove (each join is one rule instance), so a pair this
step drops is a consequence of the known rules; what it misses (proofs through a term that is in
no e-class) stays a candidate pair, to be pruned, verified and minimized as before.
"""
from __future__ import annotations

import multiprocessing
import sys
from collections.abc import Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from typing import Any

from networkx.utils import UnionFind

from eqsat.egraph.view import EGraphView
from eqsat.errors import EqsatError
from eqsat.ir.ops import get_op
from eqsat.rules.pattern import Pattern, Var, attr_vars
from eqsat.rules.rulefile import Rule

Item = tuple  # ("c", e-class) or ("n", (op, attrs, argument e-classes))


@dataclass(frozen=True)
class _Pat:
    """A pattern with canonical attributes (what the frozen e-nodes carry)."""

    op: str  # "" for a variable
    attrs: tuple
    args: tuple[_Pat, ...]
    var: str = ""


@dataclass(frozen=True)
class Direction:
    """One usable rule direction: source and target patterns and the variables' ranks and fixed sizes."""

    name: str
    src: _Pat
    dst: _Pat
    dims: tuple[tuple[str, tuple[int | None, ...]], ...]


def _compile(p: Pattern) -> _Pat | None:
    if isinstance(p, Var):
        return _Pat("", (), (), p.name)
    if attr_vars(p) != (set(), set()):  # attribute variables and dim lookups: not handled here
        return None
    args = tuple(_compile(a) for a in p.args)
    if any(a is None for a in args):
        return None
    try:
        attrs = get_op(p.op).canonical_attrs({k: v for k, v in p.attrs if v is not None})
    except EqsatError:
        return None
    return _Pat(p.op, attrs, args)  # type: ignore[arg-type]


def _vars(p: _Pat) -> set[str]:
    if not p.op:
        return {p.var}
    return set().union(*map(_vars, p.args))


def directions(rules: Sequence[Rule]) -> list[Direction]:
    """Every usable one-output direction: its source is an op pattern and binds every variable
    of its target; rules with attribute variables or ``dim`` lookups are left out."""
    out: list[Direction] = []
    for rule in rules:
        if rule.is_multi:
            continue
        dims = tuple(sorted((rule.var_dims or {}).items()))
        sides = [(rule.lhs[0], rule.rhs[0])] + ([(rule.rhs[0], rule.lhs[0])] if rule.bidirectional else [])
        for k, (a, b) in enumerate(sides):
            src, dst = _compile(a), _compile(b)
            if src is None or dst is None or not src.op or not _vars(dst) <= _vars(src):
                continue
            out.append(Direction(f"{rule.name}{'-rev' if k else ''}", src, dst, dims))
    return out


class RootRewriter:
    """Rule directions e-matched at root names over one frozen e-graph."""

    def __init__(self, view: EGraphView, rules: Sequence[Rule]):
        self.view = view
        self.by_root: dict[tuple, list[Direction]] = {}
        for d in directions(rules):
            self.by_root.setdefault((d.src.op, d.src.attrs), []).append(d)
        self.hashcons: dict[tuple, Any] = {}
        self.members: dict[tuple, list[tuple]] = {}  # (e-class, op, attrs) -> argument e-classes
        for n in view.nodes:
            if n.op == "leaf" or n.sizes:
                continue
            self.hashcons.setdefault((n.op, n.attrs, n.children), n.eclass)
            self.members.setdefault((n.eclass, n.op, n.attrs), []).append(n.children)

    # ------------------------------------------------------------------ matching
    def _fits(self, cls: Any, dims: tuple[int | None, ...] | None) -> bool:
        if dims is None:
            return True
        shape = self.view.shapes.get(cls)
        return shape is not None and len(shape) == len(dims) and all(
            d is None or d == s for d, s in zip(dims, shape))

    def _match(self, p: _Pat, cls: Any, env: dict[str, Any], dims: dict) -> Iterator[dict[str, Any]]:
        if not p.op:
            bound = env.get(p.var)
            if bound is None:
                if self._fits(cls, dims.get(p.var)):
                    yield {**env, p.var: cls}
            elif bound == cls:
                yield env
            return
        for kids in self.members.get((cls, p.op, p.attrs), ()):
            if len(kids) == len(p.args):
                yield from self._match_args(p.args, kids, env, dims)

    def _match_args(self, pats: tuple[_Pat, ...], kids: tuple, env: dict[str, Any],
                    dims: dict) -> Iterator[dict[str, Any]]:
        if not pats:
            yield env
            return
        for e in self._match(pats[0], kids[0], env, dims):
            yield from self._match_args(pats[1:], kids[1:], e, dims)

    # ------------------------------------------------------------------ building
    def _build(self, p: _Pat, env: dict[str, Any], root: bool) -> Item | None:
        if not p.op:
            return ("c", env[p.var])
        kids = []
        for a in p.args:
            k = self._build(a, env, False)
            if k is None:
                return None
            kids.append(k[1])
        key = (p.op, p.attrs, tuple(kids))
        found = self.hashcons.get(key)
        if found is not None:
            return ("c", found)
        return ("n", key) if root else None  # a new root: rewrite() checks that it type-checks

    def shape(self, item: Item) -> tuple[int, ...] | None:
        """An item's output shape: its e-class's, or the op table's shape rule on its arguments'
        (None where it does not type-check)."""
        if item[0] == "c":
            return self.view.shapes.get(item[1])
        op, attrs, kids = item[1]
        shapes = [self.view.shapes.get(k) for k in kids]
        if any(s is None for s in shapes):
            return None
        try:
            return tuple(get_op(op).shape(dict(attrs), tuple(shapes))[0])  # type: ignore[arg-type]
        except EqsatError:
            return None

    def item(self, key: tuple) -> Item:
        """A root name as an item: its e-class if the e-graph already holds that node."""
        found = self.hashcons.get(key)
        return ("c", found) if found is not None else ("n", key)

    def rewrite(self, key: tuple) -> Iterator[Item]:
        """What one rule direction at the root of the name ``key`` makes it equal to. A generated
        rule holds where both sides type-check *with equal output shapes*, so a right side that does
        not type-check or has another shape is not a rewrite."""
        op, attrs, kids = key
        directions = self.by_root.get((op, attrs), ())
        if not directions:
            return
        want = self.shape(("n", key))
        if want is None:
            return
        for d in directions:
            if len(d.src.args) != len(kids):
                continue
            dims = dict(d.dims)
            for env in self._match_args(d.src.args, kids, {}, dims):
                out = self._build(d.dst, env, True)
                if out is not None and self.shape(out) == want:
                    yield out


_SHARED: tuple[RootRewriter, list[tuple]] | None = None  # set before forking: workers read it, copy-free


def _rewrite_range(bounds: tuple[int, int]) -> list[list[Item]]:
    rewriter, frontier = _SHARED  # type: ignore[misc]
    return [list(rewriter.rewrite(key)) for key in frontier[bounds[0]:bounds[1]]]


def _rewrite_all(rewriter: RootRewriter, frontier: list[tuple], workers: int) -> list[list[Item]]:
    """Each name's rewrites, in ``workers`` forked processes when more than one (same result)."""
    if workers <= 1 or len(frontier) < 10_000 or not sys.platform.startswith("linux"):
        return [list(rewriter.rewrite(key)) for key in frontier]
    global _SHARED
    _SHARED = (rewriter, frontier)
    try:
        step = -(-len(frontier) // (4 * workers))
        chunks = [(k, min(k + step, len(frontier))) for k in range(0, len(frontier), step)]
        with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("fork")) as pool:
            return [outs for part in pool.map(_rewrite_range, chunks) for outs in part]
    finally:
        _SHARED = None


def join_names(rewriter: RootRewriter, names: Sequence[tuple], rounds: int = 1,
               workers: int = 1) -> tuple[UnionFind, int]:
    """A union-find over the names' items after ``rounds`` of root rewriting (each round rewrites
    the names the previous one produced), and the number of rule instances applied. The matching
    runs in ``workers`` processes; the joins are made here, in name order, so the result does not
    depend on ``workers``."""
    uf = UnionFind()
    seen: set[tuple] = set()
    frontier: list[tuple] = []
    for key in names:
        if key not in seen:
            seen.add(key)
            frontier.append(key)
    applied = 0
    for _ in range(rounds):
        nxt = []
        # a name the e-graph holds already is rewritten too: its rules may not have run
        for key, outs in zip(frontier, _rewrite_all(rewriter, frontier, workers)):
            it = rewriter.item(key)
            for out in outs:
                applied += 1
                uf.union(it, out)
                if out[0] == "n" and out[1] not in seen:
                    seen.add(out[1])
                    nxt.append(out[1])
        frontier = nxt
    return uf, applied
