"""Enumerate every single-output graph of at most k ops over a world (TASO generator, step 1).

A graph is a hash-consed term, so a graph never computes the same op on the same
inputs twice (TASO's "no duplicate computation"), and its size is the number of
distinct op nodes in it. Terms of size s are built by applying one op instance
to already-built terms whose op sets union to s-1 nodes; each new term is
evaluated once, from its arguments' cached exact-integer values (incremental
evaluation). Shape errors and violations of the world's kinds rule are skipped.
"""
from __future__ import annotations

import itertools
from collections.abc import Iterator
from dataclasses import dataclass, field

import numpy as np
from tqdm import tqdm

from eqsat.errors import EqsatError
from eqsat.ir.domains import INT, Domain
from eqsat.ir.graph import Node, node
from rulegen.world import OpInstance, World


@dataclass
class Enumeration:
    """All terms of a world up to ``max_ops`` ops, with their exact values on the fingerprint inputs."""

    world: World
    max_ops: int
    leaves: tuple[Node, ...]
    by_size: list[list[Node]] = field(default_factory=list)
    opsets: dict[Node, frozenset[Node]] = field(default_factory=dict)
    values: dict[Node, np.ndarray] = field(default_factory=dict)
    attempts: int = 0
    rejected_shape: int = 0
    rejected_kind: int = 0

    @property
    def terms(self) -> list[Node]:
        """Every enumerated op term, smallest first (deterministic order)."""
        return [t for level in self.by_size[1:] for t in level]

    def size(self, t: Node) -> int:
        return len(self.opsets[t])

    def counts(self) -> list[int]:
        """Number of graphs with exactly 1, 2, ..., max_ops ops."""
        return [len(level) for level in self.by_size[1:]]


def leaf_values(world: World, seed: int, low: int = -50, high: int = 50, domain: Domain = INT) -> dict[str, np.ndarray]:
    """Fingerprint inputs: exact integers in [low, high] from ``seed`` (one array per leaf)."""
    rng = np.random.default_rng(seed)
    return {leaf.name: domain.random(leaf.shape, rng, low, high) for leaf in world.leaves}


def enumerate_graphs(world: World, max_ops: int, seed: int = 0, progress: bool = False,
                     low: int = -50, high: int = 50) -> Enumeration:
    """Enumerate every term of at most ``max_ops`` ops over ``world``, with exact fingerprint values."""
    if max_ops < 1:
        raise ValueError(f"max_ops must be >= 1, got {max_ops}")
    leaves = world.leaf_nodes()
    en = Enumeration(world, max_ops, leaves)
    inputs = leaf_values(world, seed, low, high)
    for leaf in leaves:
        en.opsets[leaf] = frozenset()
        en.values[leaf] = inputs[leaf.attr("name")]
    en.by_size.append(list(leaves))
    containing: dict[Node, list[Node]] = {}  # op node -> terms whose op set contains it
    for size in range(1, max_ops + 1):
        level: list[Node] = []
        en.by_size.append(level)
        bar = tqdm(total=len(world.ops), desc=f"enumerate {world.name} size {size}", disable=not progress, leave=False)
        for inst in world.ops:
            for args in _arg_tuples(en, inst.arity, size - 1, containing):
                _try(en, inst, args, level)
            bar.update()
        bar.close()
        for t in level:
            for u in en.opsets[t]:
                containing.setdefault(u, []).append(t)
    return en


def _try(en: Enumeration, inst: OpInstance, args: tuple[Node, ...], level: list[Node]) -> None:
    en.attempts += 1
    if not inst.accepts(args):
        en.rejected_kind += 1
        return
    try:
        t = node(inst.op, *args, **dict(inst.attrs))
    except EqsatError:
        en.rejected_shape += 1
        return
    if t in en.opsets:  # already built (cannot happen for distinct argument tuples, kept as a guard)
        return
    spec = t.spec
    result = spec.evaluate(t.attr_dict, [en.values[a] for a in args], INT)
    en.values[t] = INT.reduce(result)
    en.opsets[t] = frozenset().union(*(en.opsets[a] for a in args)) | {t}
    level.append(t)


def _arg_tuples(en: Enumeration, arity: int, need: int,
                containing: dict[Node, list[Node]]) -> Iterator[tuple[Node, ...]]:
    """Argument tuples whose op sets union to exactly ``need`` nodes."""
    if arity == 1:
        yield from ((t,) for t in en.by_size[need])
        return
    if arity != 2:
        raise NotImplementedError("the generator enumerates ops of arity 1 and 2")
    for size_a in range(need + 1):
        for a in en.by_size[size_a]:
            for b in _partners(en, a, need - size_a, need, containing):
                yield (a, b)


def _partners(en: Enumeration, a: Node, extra: int, need: int,
              containing: dict[Node, list[Node]]) -> Iterator[Node]:
    """Terms b such that |ops(a) ∪ ops(b)| = |ops(a)| + extra."""
    ua = en.opsets[a]
    if extra == 0:
        yield from en.leaves
        yield from ua
        return
    for b in en.by_size[extra]:  # disjoint partners of exactly `extra` ops
        if ua.isdisjoint(en.opsets[b]):
            yield b
    if not ua:
        return
    seen: set[Node] = set()
    overlapping = itertools.chain.from_iterable(containing.get(u, ()) for u in ua)
    for b in overlapping:  # partners sharing some ops with a
        if b in seen:
            continue
        seen.add(b)
        ob = en.opsets[b]
        if len(ob) <= need and len(ob - ua) == extra and not ob <= ua:
            yield b
