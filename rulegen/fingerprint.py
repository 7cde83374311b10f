"""Fingerprints: group graphs by their exact values on fixed integer inputs (TASO generator, step 2).

Two graphs with different fingerprints are certainly different, so only graphs in
the same bucket are candidate substitutions. Values are exact Python integers,
so associativity holds bit for bit; a multi-output graph hashes the sorted
tuple of its outputs' fingerprints (order-insensitive).
"""
from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence

import numpy as np

from eqsat.ir.domains import INT
from eqsat.ir.graph import Node, topo_order
from rulegen.enumerate import Enumeration


def fingerprint(value: np.ndarray) -> int:
    """A process-independent hash of an exact value (shape and every element)."""
    return hash((value.shape, tuple(int(x) for x in value.flat)))


def multi_fingerprint(values: Sequence[np.ndarray]) -> int:
    """Symmetric hash of several outputs: the same for any order of the outputs."""
    return hash(tuple(sorted(fingerprint(v) for v in values)))


def buckets(en: Enumeration) -> dict[int, list[Node]]:
    """Fingerprint -> terms, for every leaf and enumerated op term (enumeration order inside a bucket).

    Leaves take part so that a term equal to an input (``transpose(transpose(A))``) pairs with it.
    """
    out: dict[int, list[Node]] = defaultdict(list)
    for t in list(en.leaves) + en.terms:
        out[fingerprint(en.values[t])].append(t)
    return dict(out)


def candidate_pairs(groups: dict[int, list[Node]]) -> Iterable[tuple[Node, Node]]:
    """Every unordered pair of terms that share a bucket."""
    for terms in groups.values():
        for i in range(len(terms)):
            for j in range(i + 1, len(terms)):
                yield terms[i], terms[j]


def count_pairs(groups: dict[int, list[Node]]) -> tuple[int, int]:
    """(pairs of op terms, pairs of an op term with a leaf) over all buckets."""
    ops = leaves = 0
    for g in groups.values():
        k = sum(1 for t in g if t.is_leaf)
        n = len(g) - k
        ops += n * (n - 1) // 2
        leaves += n * k
    return ops, leaves


def batched_values(terms: Sequence[Node], leaves: dict[str, np.ndarray]) -> dict[Node, np.ndarray]:
    """Evaluate terms on a stack of inputs (leading batch axis) with the op table's reference code.

    Works for ops whose reference implementation broadcasts over leading axes
    (elementwise ops, matmul); used by the collision experiment.
    """
    vals: dict[Node, np.ndarray] = {}
    for n in topo_order(terms):
        if n.is_leaf:
            vals[n] = leaves[n.attr("name")]
        else:
            vals[n] = n.spec.evaluate(n.attr_dict, [vals[x] for x in n.inputs], INT)
    return vals


def collision_rate(a: Node, b: Node, low: int, high: int, trials: int, seed: int = 0) -> float:
    """Fraction of random integer input sets in [low, high] on which terms ``a`` and ``b`` agree everywhere."""
    rng = np.random.default_rng(seed)
    leaves = {n.attr("name"): n.shape for n in topo_order([a, b]) if n.is_leaf}
    hits = 0
    done = 0
    while done < trials:
        batch = min(200_000, trials - done)
        vals = {k: rng.integers(low, high + 1, size=(batch,) + s, dtype=np.int64) for k, s in sorted(leaves.items())}
        out = batched_values([a, b], vals)
        same = np.all((out[a] == out[b]).reshape(batch, -1), axis=1)
        hits += int(same.sum())
        done += batch
    return hits / trials
