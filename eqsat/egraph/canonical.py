"""Programs that are one program with its rows and columns in another order, found without a solver.

Repeated structure (an RNN's unrolled steps, a network's identical blocks) gives the exact
extraction parts whose programs differ only in the order egglog numbered their e-nodes. A
program's :class:`Form` is its arrays in a canonical order: each column colored by its data (cost,
bounds, integrality, whether it is fixed, a caller's label) and each row by its bounds, then
both refined by their neighbours' colors (one-dimensional Weisfeiler-Leman on the row-column
graph) until no class splits; a class of columns still alike (symmetric ones) has its first
member set apart and the colors refined again, up to :data:`SPLITS` times; columns and rows are
then sorted by color, ties in the order given. Two programs with equal forms are the same program
relabelled, so one's answer, relabelled, is the other's; columns alike that are not symmetric, or
more ties than that, may give one program two forms (a miss, never a wrong answer: the keys are
the whole arrays, compared exactly).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from eqsat.egraph.solvers import Program

_M1, _M2 = np.uint64(0xBF58476D1CE4E5B9), np.uint64(0x94D049BB133111EB)
SPLITS = 8  # symmetric columns set apart one at a time at most this often (each a refinement, 0.2-2 ms)


@dataclass(frozen=True)
class Form:
    """A program's arrays in canonical order (``key``, compared exactly) and that order:
    ``order[p]`` is the column at canonical position ``p``."""

    key: bytes
    order: np.ndarray


def signature(program: Program) -> bytes:
    """What every relabelling of ``program`` shares, cheap to compute: sizes and sorted data.
    Programs with different signatures have different forms; only equal ones need one."""
    m = program.matrix
    return b"".join((np.array([*m.shape, len(m.indices)], dtype=np.int64).tobytes(),
                     np.sort(program.cost).tobytes(), np.sort(program.lower).tobytes(),
                     np.sort(program.upper).tobytes(), np.sort(m.data).tobytes()))


def canonical_form(program: Program, labels: np.ndarray) -> Form:
    """``program``'s :class:`Form`, its columns first colored by ``labels`` (one unsigned 64-bit
    integer each) besides their data."""
    m = program.matrix
    rows, cols = m.shape
    indptr, indices, data = np.asarray(m.indptr), np.asarray(m.indices), np.asarray(m.data, dtype=float)
    row_of = np.repeat(np.arange(rows), np.diff(indptr))
    by_col = np.argsort(indices, kind="stable")
    col_ptr = np.concatenate(([0], np.cumsum(np.bincount(indices, minlength=cols))))
    coef = _mix(_bits(data))
    coef_by_col, row_by_col = coef[by_col] ^ np.uint64(0x5555), row_of[by_col]
    with np.errstate(over="ignore"):
        col = _mix(labels.astype(np.uint64) ^ _mix(_bits(program.cost)) ^ _mix(_bits(program.ub) + np.uint64(1))
                   ^ (program.is_int.astype(np.uint64) << np.uint64(1)) ^ program.fixed.astype(np.uint64))
        row = _mix(_bits(program.lower) ^ _mix(_bits(program.upper) + np.uint64(7)))

        row_segments, col_segments = _Segments(indptr), _Segments(col_ptr)

        def refine(row: np.ndarray, col: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
            kinds = (_distinct(row), _distinct(col))
            while True:  # each round splits a class or ends: at most rows + columns rounds, a handful in practice
                row = _mix(row * np.uint64(3) + row_segments.sums(_mix(col[indices] ^ coef)))
                col = _mix(col * np.uint64(5) + col_segments.sums(_mix(row[row_by_col] ^ coef_by_col)))
                now = (_distinct(row), _distinct(col))
                if now == kinds:
                    return row, col
                kinds = now

        row, col = refine(row, col)
        for _ in range(SPLITS):  # columns alike (symmetric): one of the first such class set apart
            tied = _first_tie(col)
            if tied is None:
                break
            col = col.copy()
            col[tied] = _mix(col[tied:tied + 1] ^ np.uint64(0x9E3779B97F4A7C15))[0]
            row, col = refine(row, col)
    order, row_order = np.argsort(col, kind="stable"), np.argsort(row, kind="stable")
    position, row_position = np.empty(cols, dtype=np.int64), np.empty(rows, dtype=np.int64)
    position[order], row_position[row_order] = np.arange(cols), np.arange(rows)
    entries = np.lexsort((data, row_position[row_of] * cols + position[indices]))
    key = b"".join((np.array([rows, cols], dtype=np.int64).tobytes(),
                    program.cost[order].tobytes(), program.ub[order].tobytes(),
                    program.is_int[order].tobytes(), program.fixed[order].tobytes(),
                    program.lower[row_order].tobytes(), program.upper[row_order].tobytes(),
                    np.diff(indptr)[row_order].astype(np.int64).tobytes(),
                    position[indices][entries].tobytes(), data[entries].tobytes()))
    return Form(key, order)


def relabel(x: np.ndarray, source: Form, target: Form) -> np.ndarray:
    """A solution of the program with form ``source``, as the columns of ``target``'s program
    (the same form, another order) number them."""
    out = np.empty_like(x)
    out[target.order] = x[source.order]
    return out


def _bits(a: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(a, dtype=np.float64).view(np.uint64)


def _mix(x: np.ndarray) -> np.ndarray:
    """splitmix64's finalizer, elementwise: nearby inputs, unrelated outputs."""
    x = x.astype(np.uint64, copy=True)
    with np.errstate(over="ignore"):
        x ^= x >> np.uint64(30)
        x *= _M1
        x ^= x >> np.uint64(27)
        x *= _M2
        x ^= x >> np.uint64(31)
    return x


class _Segments:
    """The segments of an ``indptr`` (rows of a CSR matrix, or columns of a CSC one), with what
    summing over them needs worked out once: a refinement sums over them every round."""

    def __init__(self, indptr: np.ndarray) -> None:
        self.size = len(indptr) - 1
        self.full = np.flatnonzero(np.diff(indptr))  # reduceat would give an empty segment its next one's first value
        self.starts = indptr[:-1][self.full]

    def sums(self, values: np.ndarray) -> np.ndarray:
        """Per segment, the sum of ``values`` modulo 2**64 (a multiset's hash: order-free)."""
        out = np.zeros(self.size, dtype=np.uint64)
        if len(self.full):
            with np.errstate(over="ignore"):
                out[self.full] = np.add.reduceat(values, self.starts)
        return out


def _first_tie(col: np.ndarray) -> int | None:
    """The first column (in the given order) of the tied class with the least color, or None."""
    s = np.sort(col)
    same = np.flatnonzero(s[1:] == s[:-1])
    return None if not len(same) else int(np.flatnonzero(col == s[same[0]])[0])


def _distinct(a: np.ndarray) -> int:
    """How many different values: by sorting (``np.unique`` costs 30 ms the first time in a process)."""
    s = np.sort(a)
    return int(np.count_nonzero(s[1:] != s[:-1])) + 1 if len(s) else 0
