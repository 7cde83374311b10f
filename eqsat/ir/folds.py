"""Weight-only matrix products, evaluated in the order their consumer makes cheapest.

An optimized graph often folds weights: ``X @ (Wo @ Wq)`` instead of ``(X @ Wo) @ Wq``. Its cost
is right (the fold is a constant in the written file), but evaluating it to check the result
costs a 1024^3 product per fold, and an 8-layer BERT has 21 of them: most of the check's time.
The evaluator keeps such a product as a :class:`Product` of its two factors and lets the consumer
associate it: ``X @ Product(A, B)`` is computed as ``(X @ A) @ B`` when that is fewer
multiply-adds. In the exact domains association changes nothing; in float64 it changes rounding
within the comparison's tolerance. Any op that cannot take the factored form gets the product
materialized, so the values are always the graph's values.
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

    def value(self, contract: Contract) -> np.ndarray:
        return contract(self.left, self.right)


def matmul_in(domain: Domain) -> Contract:
    """A 2-D product computed and reduced in ``domain`` (what the op table's matmul does)."""
    return lambda a, b: domain.reduce(domain.contract(np.matmul, a, b, terms=a.shape[-1]))


def defer(op: str, attrs: dict[str, Any], xs: Sequence[Any], weight_only: bool) -> Product | None:
    """A deferred product for a plain 2-D matmul of weight-only operands, else None."""
    if op != "matmul" or not weight_only or attrs.get("act", "none") != "none":
        return None
    a, b = xs
    if isinstance(a, Product) or isinstance(b, Product) or a.ndim != 2 or b.ndim != 2:
        return None
    return Product(a, b)


def rewrite(op: str, attrs: dict[str, Any], xs: Sequence[Any], contract: Contract) -> Any:
    """The value of ``op`` on inputs some of which are :class:`Product`\\ s without materializing
    them where an association or factoring keeps the product thin, else None (the caller then
    materializes the inputs and evaluates the op as usual)."""
    if op == "matmul" and attrs.get("act", "none") == "none" and len(xs) == 2:
        a, b = xs
        if isinstance(b, Product) and not isinstance(a, Product):
            rows = int(np.prod(a.shape[:-1]))
            k, m, n = b.left.shape[0], b.left.shape[1], b.right.shape[1]
            if rows * m * (k + n) < k * m * n + rows * k * n:
                return contract(contract(a, b.left), b.right)
        if isinstance(a, Product) and not isinstance(b, Product) and b.ndim == 2:
            cols = b.shape[1]
            k, m, n = a.left.shape[0], a.left.shape[1], a.right.shape[1]
            if cols * m * (k + n) < k * m * n + k * n * cols:
                return contract(a.left, contract(a.right, b))
        return None
    if op == "transpose" and len(xs) == 1 and isinstance(xs[0], Product) and tuple(attrs["perm"]) == (1, 0):
        return Product(xs[0].right.T, xs[0].left.T)
    if op == "concat" and all(isinstance(x, Product) for x in xs):
        axis = attrs["axis"]
        if axis == 1 and all(x.left is xs[0].left for x in xs):
            return Product(xs[0].left, np.concatenate([x.right for x in xs], axis=1))
        if axis == 0 and all(x.right is xs[0].right for x in xs):
            return Product(np.concatenate([x.left for x in xs], axis=0), xs[0].right)
    return None


def materialize(value: Any, contract: Contract) -> Any:
    """``value`` with a deferred product computed."""
    return value.value(contract) if isinstance(value, Product) else value
