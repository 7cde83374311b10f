"""Matmul transformations for PET: split the output columns and concat, or split the reduction and
add the partial products. Both are multilinear programs over the op table; with no padding every
output position sums over all of K, so each output axis is one box and Theorem 1 needs m + 1 = 3
positions for the whole output."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from eqsat.ir.domains import MERSENNE_31, modp
from eqsat.ir.evaluate import evaluate
from eqsat.ir.graph import Graph, input_, node, weight
from pet.verify import Region


@dataclass(frozen=True)
class MatmulProblem:
    M: int
    K: int
    N: int

    def leaves(self):
        return input_("a", (self.M, self.K)), weight("b", (self.K, self.N))

    def original(self) -> Graph:
        a, b = self.leaves()
        return Graph([node("matmul", a, b)], name="matmul")


@dataclass(frozen=True)
class MatmulSplit:
    """``axis="N"``: B's columns in ``parts`` pieces, one matmul each, outputs concatenated;
    ``axis="K"``: the reduction in pieces, partial products added."""

    axis: str
    parts: int

    @property
    def name(self) -> str:
        return f"matmul-split-{self.axis}-{self.parts}"

    def applies(self, p: MatmulProblem) -> bool:
        size = p.N if self.axis == "N" else p.K
        return self.parts >= 2 and size % self.parts == 0

    def program(self, p: MatmulProblem) -> Graph:
        a, b = p.leaves()
        s = self.parts
        if self.axis == "N":
            sb = node("split", b, axis=1, sizes=(p.N // s,) * s)
            outs = [node("matmul", a, node("proj", sb, index=i)) for i in range(s)]
            return Graph([node("concat", *outs, axis=1)], name=self.name)
        sa = node("split", a, axis=1, sizes=(p.K // s,) * s)
        sb = node("split", b, axis=0, sizes=(p.K // s,) * s)
        parts = [node("matmul", node("proj", sa, index=i), node("proj", sb, index=i)) for i in range(s)]
        total = parts[0]
        for q in parts[1:]:
            total = node("ewadd", total, q)
        return Graph([total], name=self.name)


def verify_matmul(p: MatmulProblem, t: MatmulSplit, tests: int = 3, prime: int = MERSENNE_31, seed: int = 0
                  ) -> tuple[list[Region], list[Region], int]:
    """(regions, non-equivalent regions, positions checked) for a matmul transformation."""
    region = Region(((0, p.M - 1), (0, p.N - 1)))
    rng = np.random.default_rng(seed)
    bad = False
    for _ in range(tests):
        vals = {"a": rng.integers(0, prime, size=(p.M, p.K), dtype=np.int64),
                "b": rng.integers(0, prime, size=(p.K, p.N), dtype=np.int64)}
        x = evaluate(p.original(), vals, modp(prime))[0]
        y = evaluate(t.program(p), vals, modp(prime))[0]
        bad |= any(x[pos] != y[pos] for pos in region.positions())
    return [region], [region] if bad else [], len(region.positions())
