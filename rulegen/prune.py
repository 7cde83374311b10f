"""Pruning redundant candidate substitutions (TASO generator, step 3).

Two kinds (docs/reference.md):

* **input renaming**: pairs equal up to a permutation of interchangeable leaves
  (same kind and shape) and up to swapping the sides collapse to one;
* **common subgraphs**:
  - *common root*: both sides apply the same op (same attributes) to arguments
    that are pairwise identical or fingerprint-equal, so the pair follows from
    the argument pairs (e.g. ``relu(A+B) <=> relu(B+A)``);
  - *generalizable common subgraph*: the sides share an op subterm S, and the
    pair stays equal when S is replaced by a fresh input D; the more general
    pair is kept instead (added if no candidate already has its form).
"""
from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from eqsat.ir.domains import INT
from eqsat.ir.evaluate import evaluate_nodes
from eqsat.ir.graph import Graph, Node, input_, leaves_of, node, weight
from rulegen.enumerate import Enumeration
from rulegen.fingerprint import fingerprint

_PRIVATE = 0xE000  # leaf i is written as chr(_PRIVATE + i) in templates
FRESH = "D"


@dataclass
class Pruned:
    kept: list[tuple[Node, Node]] = field(default_factory=list)
    removed_renaming: int = 0
    removed_common_root: int = 0
    removed_common_subgraph: int = 0
    generalized_added: int = 0


class Serializer:
    """Memoized text of terms with leaves as single placeholder characters (cheap renaming)."""

    def __init__(self, leaves: Sequence[Node]):
        self.index = {leaf: i for i, leaf in enumerate(leaves)}
        self.cache: dict[Node, str] = {}

    def __call__(self, t: Node) -> str:
        found = self.cache.get(t)
        if found is not None:
            return found
        if t.is_leaf:
            text = chr(_PRIVATE + self.index[t]) if t in self.index else f"<{t.attr('name')}>"
        else:
            attrs = "".join(f":{k}={v}" for k, v in t.attrs if v is not None)
            text = f"({t.op}{attrs} " + " ".join(self(x) for x in t.inputs) + ")"
        self.cache[t] = text
        return text


def leaf_permutations(leaves: Sequence[Node]) -> list[dict[int, int]]:
    """Translation tables for every permutation of interchangeable leaves (same op kind and shape)."""
    groups: dict[tuple, list[int]] = {}
    for i, leaf in enumerate(leaves):
        groups.setdefault((leaf.op, leaf.shape), []).append(i)
    tables = []
    for choice in itertools.product(*(itertools.permutations(g) for g in groups.values())):
        table: dict[int, int] = {}
        for group, perm in zip(groups.values(), choice):
            for src, dst in zip(group, perm):
                table[_PRIVATE + src] = _PRIVATE + dst
        tables.append(table)
    return tables


def canonical_key(a: str, b: str, tables: Sequence[dict[int, int]]) -> tuple[str, str]:
    """The least (side, side) text over leaf renamings and side order."""
    best: tuple[str, str] | None = None
    for table in tables:
        x, y = a.translate(table), b.translate(table)
        key = (x, y) if x <= y else (y, x)
        if best is None or key < best:
            best = key
    assert best is not None
    return best


def substitute(t: Node, old: Node, new: Node, memo: dict[Node, Node] | None = None) -> Node:
    """``t`` with every occurrence of ``old`` replaced by ``new`` (sharing kept)."""
    memo = {} if memo is None else memo
    if t is old:
        return new
    if t in memo:
        return memo[t]
    if t.is_leaf:
        return t
    out = node(t.op, *(substitute(x, old, new, memo) for x in t.inputs), **t.attr_dict)
    memo[t] = out
    return out


def maximal_common(en: Enumeration, a: Node, b: Node) -> list[Node]:
    """Op subterms shared by ``a`` and ``b`` that are not inside another shared subterm (largest first)."""
    common = en.opsets[a] & en.opsets[b]
    maximal = [s for s in common if not any(s is not o and s in en.opsets[o] for o in common)]
    return sorted(maximal, key=lambda s: (-len(en.opsets[s]), s.digest))


def _equal_values(en: Enumeration, a: Node, b: Node, fresh: Node, rng: np.random.Generator) -> bool:
    values = {leaf.attr("name"): en.values[leaf] for leaf in en.leaves}
    if fresh not in en.leaves:
        values[fresh.attr("name")] = INT.random(fresh.shape, rng)
    vals = evaluate_nodes(Graph((a, b)), values, INT)
    return bool(np.array_equal(vals[a], vals[b]))


def prune(en: Enumeration, groups: dict[int, list[Node]], seed: int = 0) -> Pruned:
    """Apply both pruning kinds to every candidate pair, in a deterministic order."""
    ser = Serializer(en.leaves)
    tables = leaf_permutations(en.leaves)
    fp = _Fingerprints(en)  # of any term, not only the grouped ones (arguments need not be grouped)
    rng = np.random.default_rng(seed)
    out = Pruned()
    seen: set[tuple[str, str]] = set()
    general: list[tuple[Node, Node]] = []
    for terms in groups.values():
        for a, b in itertools.combinations(terms, 2):
            key = canonical_key(ser(a), ser(b), tables)
            if key in seen:
                out.removed_renaming += 1
                continue
            seen.add(key)
            if _common_root(a, b, fp):
                out.removed_common_root += 1
                continue
            generalized = _generalize(en, a, b, rng)
            if generalized is not None:
                out.removed_common_subgraph += 1
                general.append(generalized)
                continue
            out.kept.append((a, b))
    # the more general pairs stand in for the ones they subsume (once per canonical form)
    for a, b in general:  # the fresh leaf D prints as <D>; renamings leave it alone
        key = canonical_key(ser(a), ser(b), tables)
        if key not in seen:
            seen.add(key)
            out.kept.append((a, b))
            out.generalized_added += 1
    return out


class _Fingerprints(dict):
    """Term -> fingerprint, computed on first use."""

    def __init__(self, en: Enumeration):
        super().__init__()
        self.en = en

    def __missing__(self, t: Node) -> int:
        self[t] = fingerprint(self.en.values[t])
        return self[t]


def _common_root(a: Node, b: Node, fp: _Fingerprints) -> bool:
    if a.op != b.op or a.attrs != b.attrs or len(a.inputs) != len(b.inputs):
        return False
    return all(x is y or fp[x] == fp[y] for x, y in zip(a.inputs, b.inputs))


def _fresh_leaf(en: Enumeration, a: Node, b: Node, s: Node) -> Node:
    """A world leaf of S's shape and kind that neither side reads, else a new leaf D."""
    used = set(leaves_of([a, b]))
    for leaf in en.leaves:
        if leaf not in used and leaf.shape == s.shape and leaf.is_const == s.is_const:
            return leaf
    return (weight if s.is_const else input_)(FRESH, s.shape)


def _generalize(en: Enumeration, a: Node, b: Node, rng: np.random.Generator) -> tuple[Node, Node] | None:
    for s in maximal_common(en, a, b):
        fresh = _fresh_leaf(en, a, b, s)
        ga, gb = substitute(a, s, fresh), substitute(b, s, fresh)
        if ga is gb:
            continue
        if _equal_values(en, ga, gb, fresh, rng):
            if fresh not in en.leaves:  # S's own leaves may have dropped out: let D take one's name
                leaf = _fresh_leaf(en, ga, gb, fresh)
                if leaf in en.leaves:
                    ga, gb = substitute(ga, fresh, leaf), substitute(gb, fresh, leaf)
            return ga, gb
    return None

