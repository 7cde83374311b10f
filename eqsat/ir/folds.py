"""Weight-only matrix products, evaluated in the order their consumer makes cheapest.

An optimized graph often folds weights: ``X @ (Wo @ Wq)`` instead of ``(X @ Wo) @ Wq``. Its cost
is right (the fold is a constant in the written file), but evaluating it to check the result
costs a 1024^3 product per fold, and an 8-layer BERT has 21 of them: most of the check's time.
The evaluator keeps such a product as a :class:`Product` of its two factors and lets the consumer
associate it: ``X @ Product(A, B)`` is computed as ``(X @ A) @ B`` when that is fewer
multiply-adds. In the exact domains association changes nothing; in float64 it changes rounding
within the comparison's tolerance. Any op that cannot take the factored form gets the product
materialized, so the values are always the graph's values.

A weight-only concatenation along columns stays a :class:`Columns` of its parts: a product by it
is the products by its parts side by side (no concatenated copy of the weights; with a
:class:`~eqsat.ir.valuenum.ValueTable` behind the contraction those products are the ones the
input graph computed for its separate Q, K and V).
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from eqsat.ir.domains import Domain

Contract = Callable[[np.ndarray, np.ndarray], np.ndarray]  # matmul in the domain, reduced


@dataclass(frozen=True, eq=False)
class Product:
    """``left @ right`` of two 2-D operands, not yet computed."""

    left: np.ndarray
    right: np.ndarray

    @property
    def shape(self) -> tuple[int, int]:
        return (self.left.shape[0], self.right.shape[1])

    @property
    def parts(self) -> tuple[Any, Any]:
        return (self.left, self.right)

    def value(self, contract: Contract) -> np.ndarray:
        return times(materialize(self.left, contract), self.right, contract)


@dataclass(frozen=True, eq=False)
class Columns:
    """``concatenate(parts, axis=1)`` of 2-D weight-only operands (arrays or :class:`Product`\\ s),
    not yet built."""

    parts: tuple[Any, ...]

    @property
    def shape(self) -> tuple[int, int]:
        return (self.parts[0].shape[0], sum(p.shape[1] for p in self.parts))

    def value(self, contract: Contract) -> np.ndarray:
        return np.concatenate([materialize(p, contract) for p in self.parts], axis=1)


def times(a: np.ndarray, b: Any, contract: Contract) -> np.ndarray:
    """``a @ b`` for an array ``a`` and a weight-only ``b`` that may be deferred: by a
    :class:`Columns` part by part, by a :class:`Product` associated when that is fewer
    multiply-adds."""
    if isinstance(b, Columns):
        return np.concatenate([times(a, p, contract) for p in b.parts], axis=-1)
    if isinstance(b, Product):
        rows = int(np.prod(a.shape[:-1]))
        k, m, n = b.left.shape[0], b.left.shape[1], b.right.shape[1]
        if rows * m * (k + n) < k * m * n + rows * k * n:
            return times(contract(a, materialize(b.left, contract)), b.right, contract)
        return contract(a, b.value(contract))
    return contract(a, b)


def matmul_in(domain: Domain) -> Contract:
    """A 2-D product computed and reduced in ``domain`` (what the op table's matmul does)."""
    return lambda a, b: domain.reduce(domain.contract(np.matmul, a, b, terms=a.shape[-1]))


def defer(op: str, attrs: dict[str, Any], xs: Sequence[Any], weight_only: bool) -> Product | Columns | None:
    """A deferred product for a plain 2-D matmul of weight-only operands, deferred columns for a
    weight-only 2-D concatenation along axis 1, else None."""
    if not weight_only:
        return None
    if op == "concat" and attrs["axis"] == 1 and all(_is_matrix(x) or isinstance(x, (Product, Columns)) for x in xs):
        if all(isinstance(x, Product) for x in xs) and all(x.left is xs[0].left for x in xs):
            return Product(xs[0].left, Columns(_flat([x.right for x in xs])))
        return Columns(_flat(xs))
    if op != "matmul" or attrs.get("act", "none") != "none":
        return None
    a, b = xs
    if not _is_matrix(a) or not (_is_matrix(b) or isinstance(b, Columns)):
        return None
    return Product(a, b)


def _is_matrix(x: Any) -> bool:
    return isinstance(x, np.ndarray) and x.ndim == 2


def _flat(xs: Sequence[Any]) -> tuple[Any, ...]:
    return tuple(p for x in xs for p in (x.parts if isinstance(x, Columns) else (x,)))


def rewrite(op: str, attrs: dict[str, Any], xs: Sequence[Any], contract: Contract) -> Any:
    """The value of ``op`` on inputs some of which are deferred without materializing them where
    an association or factoring keeps the product thin, else None (the caller then materializes
    the inputs and evaluates the op as usual)."""
    if op == "matmul" and attrs.get("act", "none") == "none" and len(xs) == 2:
        a, b = xs
        if isinstance(a, np.ndarray) and isinstance(b, (Product, Columns)):
            return times(a, b, contract)
        if isinstance(a, Product) and _is_matrix(a.right) and _is_matrix(b):
            cols = b.shape[1]
            k, m, n = a.left.shape[0], a.left.shape[1], a.right.shape[1]
            if cols * m * (k + n) < k * m * n + k * n * cols:
                return contract(a.left, contract(a.right, b))
        return None
    if op == "transpose" and len(xs) == 1 and isinstance(xs[0], Product) and _is_matrix(xs[0].right) \
            and tuple(attrs["perm"]) == (1, 0):
        return Product(xs[0].right.T, xs[0].left.T)
    if op == "concat" and attrs["axis"] == 0 and all(isinstance(x, Product) for x in xs) \
            and all(x.right is xs[0].right for x in xs):
        return Product(np.concatenate([x.left for x in xs], axis=0), xs[0].right)
    return None


def materialize(value: Any, contract: Contract) -> Any:
    """``value`` with a deferred product or concatenation computed."""
    return value.value(contract) if isinstance(value, (Product, Columns)) else value
