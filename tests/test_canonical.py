"""Programs in canonical form (eqsat/egraph/canonical.py): the same program with its rows and
columns in another order has the same form, and an answer carries over; any other change of
data gives another form."""
from __future__ import annotations

import numpy as np
import pytest

from eqsat.egraph.canonical import canonical_form, relabel, signature
from eqsat.egraph.program import as_program
from eqsat.egraph.solvers import Program, Rows


def _from_dense(dense: np.ndarray, cost: np.ndarray, lower: np.ndarray, upper: np.ndarray,
                fixed: np.ndarray) -> Program:
    """A program from a dense matrix, built as extraction builds one (``program.as_program``)."""
    rows = [([(int(k), float(r[k])) for k in np.flatnonzero(r)], lo, up) for r, lo, up in zip(dense, lower, upper)]
    return as_program(rows, np.asarray(cost, dtype=float), np.asarray(fixed, dtype=bool))


def _dense(p: Program) -> np.ndarray:
    m, out = p.matrix, np.zeros(p.matrix.shape)
    for r in range(m.shape[0]):
        out[r, m.indices[m.indptr[r]:m.indptr[r + 1]]] = m.data[m.indptr[r]:m.indptr[r + 1]]
    return out


def _program(rng: np.random.Generator, rows: int, cols: int) -> Program:
    dense = (rng.random((rows, cols)) < 0.3) * rng.choice([-1.0, 1.0, 2.0], size=(rows, cols))
    return _from_dense(dense, rng.choice([0.0, 1.0, 2.5], size=cols), rng.choice([-np.inf, 0.0], size=rows),
                       rng.choice([1.0, np.inf], size=rows), rng.random(cols) < 0.1)


def _permuted(p: Program, cols: np.ndarray, rows: np.ndarray) -> Program:
    """``p`` with column ``cols[k]`` as its k-th and row ``rows[k]`` as its k-th."""
    return _from_dense(_dense(p)[rows][:, cols], p.cost[cols], p.lower[rows], p.upper[rows], p.fixed[cols])


@pytest.mark.parametrize("seed", range(5))
def test_a_relabelled_program_has_the_same_form_and_its_answer_carries_over(seed: int) -> None:
    rng = np.random.default_rng(seed)
    p = _program(rng, 12, 9)
    labels = rng.integers(0, 3, size=9).astype(np.uint64)
    cols, rows = rng.permutation(9), rng.permutation(12)
    q = _permuted(p, cols, rows)
    a, b = canonical_form(p, labels), canonical_form(q, labels[cols])
    assert signature(p) == signature(q)
    if a.key != b.key:  # symmetric columns met in another order: a miss, allowed, never a wrong match
        pytest.skip("symmetric columns in another order")
    x = rng.integers(0, 2, size=9).astype(float)
    assert np.array_equal(relabel(x, a, b), x[cols])  # q's column k is p's column cols[k]


def test_any_other_data_gives_another_form() -> None:
    rng = np.random.default_rng(7)
    p = _program(rng, 10, 8)
    labels = np.arange(8, dtype=np.uint64)  # every column told apart: the form is canonical
    base = canonical_form(p, labels).key
    m = p.matrix
    changed = [
        Program(p.cost + np.eye(8)[3], m, p.lower, p.upper, p.fixed),
        Program(p.cost, Rows(m.indptr, m.indices, m.data * np.where(np.arange(len(m.data)) == 2, 3.0, 1.0), m.shape),
                p.lower, p.upper, p.fixed),
        Program(p.cost, m, p.lower, np.where(np.arange(10) == 4, 7.0, p.upper), p.fixed),
        Program(p.cost, m, p.lower, p.upper, ~p.fixed),
    ]
    assert all(canonical_form(q, labels).key != base for q in changed)
    assert canonical_form(p, labels[::-1].copy()).key != base  # the labels are part of a column's data
    q = _permuted(p, np.arange(8)[::-1].copy(), np.arange(10))
    assert canonical_form(q, labels[::-1].copy()).key == base


def test_symmetric_columns_in_another_order_have_the_same_form() -> None:
    """Two copies of one column pair (same costs, each pair's own rows) look alike to the
    refinement; one is set apart, and either order gives one form."""
    rows = [[(0, 1.0), (1, 1.0)], [(2, 1.0), (3, 1.0)], [(0, -1.0), (4, 1.0)], [(2, -1.0), (4, 1.0)]]
    p = as_program([(r, 0.0, np.inf) for r in rows], np.array([1.0, 2.0, 1.0, 2.0, 0.5]), np.zeros(5, dtype=bool))
    cols = np.array([0, 3, 2, 1, 4])  # in the given order the first of each kind no longer pair up
    q = _permuted(p, cols, np.array([1, 0, 3, 2]))
    labels = np.zeros(5, dtype=np.uint64)
    a, b = canonical_form(p, labels), canonical_form(q, labels)
    assert a.key == b.key
    x = np.array([1.0, 0.0, 0.0, 1.0, 1.0])
    y = relabel(x, a, b)
    assert float(q.cost @ y) == float(p.cost @ x)


def test_twins_keep_every_program_they_met_so_ids_stay_unique() -> None:
    """Twins keys programs by ``id``: a repeat it met must stay alive while it lives, or a later
    program could take its id and be given the repeat's twin and form (a wrong answer)."""
    import gc
    import weakref
    from dataclasses import dataclass

    from eqsat.egraph.twins import Twins
    from eqsat.egraph.view import EGraphView

    @dataclass
    class Part:
        program: Program
        cols: list[int]

        def needs(self, leaf: int) -> bool:
            return False

    rng = np.random.default_rng(3)
    p = _program(rng, 6, 5)
    twins = Twins(EGraphView())
    assert twins.twin(Part(p, [])) is None
    copy = Part(_permuted(p, np.arange(5)[::-1].copy(), np.arange(6)), [])
    gone = weakref.ref(copy.program)
    twins.twin(copy)
    del copy
    gc.collect()
    assert gone() is not None
