"""Value numbering for a numerical check: equal values get one number, and an op applied to inputs
whose numbers it has seen before returns the value it computed then.

A check evaluates an optimized graph beside its input. Nodes are interned, so the parts the two
share run once; but a rewrite changes every node downstream of it although the values there are
mostly the input's own (a 32-layer BERT whose Q/K/V products are merged and whose output
projection is folded into the next layer's weight has no node past its first layer in common with
its input, yet after each merged product is split again every value is the input's). Numbering
values by content lets the optimized graph reuse the input's results wherever they agree: the
same op on bitwise-equal inputs gives a bitwise-equal output, so every value, and so the
comparison, is exactly what evaluating each node on its own gives. A wrong rewrite changes a value;
that value gets a new number and everything downstream of it is computed afresh.

Kept results are bounded by a byte budget (oldest dropped first) that the evaluation raises to the
most bytes it has held itself, so a check holds at most twice what it held without the table and
its memory still follows the graph's width, not its depth; a dropped result is only computed
again.
"""
from __future__ import annotations

import weakref
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Any

import numpy as np

SAMPLES = 64  # entries a fingerprint reads: random residues or floats almost never agree on all of them
BUCKET_SCAN = 4  # candidates compared in full per fingerprint; past that a value just gets a new number


def _fingerprint(arr: np.ndarray) -> Hashable:
    """Shape, dtype and a few evenly spaced entries (by logical position, so a transposed view and
    a contiguous copy of the same values agree)."""
    if arr.size == 0:
        return (arr.shape, arr.dtype.str)
    pos = np.linspace(0, arr.size - 1, num=min(arr.size, SAMPLES)).astype(np.int64)
    sample = arr[np.unravel_index(pos, arr.shape)] if arr.ndim else arr.reshape(1)
    return (arr.shape, arr.dtype.str, sample.tobytes())


def _identical(a: np.ndarray, b: np.ndarray) -> bool:
    """Bitwise the same values (a NaN never matches, so a value derived from it is recomputed; the
    sign of a float zero counts, since 1/x tells them apart)."""
    if a is b:
        return True
    if not np.array_equal(a, b):
        return False
    return a.dtype.kind != "f" or np.array_equal(np.signbit(a), np.signbit(b))


class ValueTable:
    """Numbers for values and results kept by (op, attributes, input numbers)."""

    def __init__(self, budget_bytes: int = 0):
        self.budget = budget_bytes
        self._by_id: dict[int, tuple[weakref.ref, int]] = {}
        self._buckets: dict[Hashable, list[tuple[weakref.ref, int]]] = {}
        self._kept: OrderedDict[Hashable, tuple[Any, int]] = OrderedDict()
        self._count = 0
        self._bytes = 0
        self.hits = 0
        self.misses = 0

    def number(self, value: Any) -> Hashable:
        """The number of ``value``: by content for an array (the first array seen with the same
        values, while one of them is alive), by structure for a tuple or a deferred value with
        ``parts`` (folds' Product and Columns: the type and its operands' numbers)."""
        if isinstance(value, tuple):
            return ("tuple",) + tuple(self.number(v) for v in value)
        if not isinstance(value, np.ndarray):
            parts = getattr(value, "parts", None)
            if parts is None:
                raise TypeError(f"no value number for {type(value).__name__}")
            return (type(value).__name__,) + tuple(self.number(p) for p in parts)
        known = self._by_id.get(id(value))
        if known is not None and known[0]() is value:
            return known[1]
        fingerprint = _fingerprint(value) if value.dtype.kind in "biuf" else None  # object arrays: not shared
        bucket = self._buckets.get(fingerprint, []) if fingerprint is not None else []
        num = next((candidate for ref, candidate in bucket[-BUCKET_SCAN:]
                    if (other := ref()) is not None and _identical(value, other)), None)
        if num is None:
            num = self._count = self._count + 1
        ref = weakref.ref(value, self._forget(id(value), fingerprint))
        self._by_id[id(value)] = (ref, num)
        if fingerprint is not None:
            self._buckets.setdefault(fingerprint, []).append((ref, num))
        return num

    def _forget(self, ident: int, fingerprint: Hashable) -> Callable[[weakref.ref], None]:
        """What to do when a numbered array dies: its entries go, so the table's own size follows
        the arrays alive, not every array the evaluation made. It holds the table weakly: held
        strongly, every array's callback made the table part of a reference cycle, and its kept
        results outlived the check until the cycle collector ran (115 MB after a BERT's check,
        resident beside the written file's onnxruntime session)."""
        table = weakref.ref(self)

        def gone(ref: weakref.ref) -> None:
            owner = table()
            if owner is None:  # the table went first: nothing to forget
                return
            if owner._by_id.get(ident, (None,))[0] is ref:
                del owner._by_id[ident]
            bucket = owner._buckets.get(fingerprint)
            if bucket is not None:
                bucket[:] = [entry for entry in bucket if entry[0] is not ref]
                if not bucket:
                    del owner._buckets[fingerprint]
        return gone

    def key(self, op: str, attrs: Hashable, inputs: list[Any]) -> Hashable:
        """The key of ``op`` with ``attrs`` on these input values."""
        return (op, attrs, tuple(self.number(x) for x in inputs))

    def get(self, key: Hashable) -> Any:
        """The result kept for ``key``, or None."""
        found = self._kept.get(key)
        if found is None:
            self.misses += 1
            return None
        self.hits += 1
        self._kept.move_to_end(key)
        return found[0]

    def put(self, key: Hashable, value: Any) -> None:
        """Keep ``value`` as the result for ``key`` (arrays and tuples of them; deferred values are
        cheap to rebuild and not kept), dropping the oldest results past the budget."""
        if not _keepable(value) or key in self._kept:
            return
        size = nbytes(value)
        self._kept[key] = (value, size)
        self._bytes += size
        self.shrink()

    def shrink(self) -> None:
        """Drop the oldest kept results until they fit the budget."""
        while self._bytes > self.budget and self._kept:
            _, (_, size) = self._kept.popitem(last=False)
            self._bytes -= size

    def memoized(self, op: str, attrs: Hashable, fn: Callable[[np.ndarray, np.ndarray], np.ndarray]
                 ) -> Callable[[np.ndarray, np.ndarray], np.ndarray]:
        """``fn`` (an op on two arrays, such as folds' contraction) answering from the table under
        the same key as a node ``op`` with ``attrs`` on the same values."""
        def call(a: np.ndarray, b: np.ndarray) -> np.ndarray:
            key = self.key(op, attrs, [a, b])
            found = self.get(key)
            if found is None:
                found = fn(a, b)
                self.put(key, found)
            return found
        return call


def nbytes(value: Any) -> int:
    """Bytes a value holds (a tuple, or a deferred product or concatenation: its parts')."""
    if isinstance(value, np.ndarray):
        return value.nbytes
    parts = value if isinstance(value, tuple) else getattr(value, "parts", ())
    return sum(nbytes(v) for v in parts)


def _keepable(value: Any) -> bool:
    """An array or a tuple of arrays: what :meth:`ValueTable.put` keeps."""
    return isinstance(value, np.ndarray) or (isinstance(value, tuple) and all(isinstance(v, np.ndarray) for v in value))
