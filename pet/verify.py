"""PET's verification (Theorems 1 and 2) and correction of a partially equivalent program.

Boxes: along each spatial axis, consecutive output positions whose summation interval is the
same (the same kernel offsets read real input, shifted by the stride) form a box; both programs'
boxes come from their index arithmetic (``reads``). Regions are the products of the intersected
boxes over the axes (batch and output channels are one box each).

Theorem 1: two multilinear programs equal at v0 and v0 + e_i (every axis with room) of a region
are equal on the whole region, so m + 1 positions per region are checked. Theorem 2: at a
position where they differ, a random input in GF(p) makes them agree with probability at most
n/p (n inputs), so t tests miss with probability at most (n/p)^t. Both programs are evaluated
exactly in GF(p) (p = 2^31 - 1 by default, every product reduced).

Correction: each non-equivalent region is recomputed from the input sub-tensor it reads, with
the original operator; adjacent regions merge into one kernel. The corrected program equals the
original exactly.
"""
from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from eqsat.ir.domains import FLOAT, MERSENNE_31, Domain, modp
from eqsat.ir.evaluate import evaluate
from eqsat.ir.graph import Graph, input_, node, weight
from eqsat.ir.ops import pad_array
from pet.programs import ConvProblem, Transformation

Interval = tuple[int, int]  # inclusive


def boxes(size: int, kernel: int, reads: Callable[[int, int], int | None], stride: int) -> list[Interval]:
    """Maximal runs of output positions whose summation intervals are one interval shifted."""
    def signature(o: int) -> tuple:
        return tuple(None if reads(o, j) is None else reads(o, j) - o * stride for j in range(kernel))

    out: list[Interval] = []
    start = 0
    for o in range(1, size + 1):
        if o == size or signature(o) != signature(start):
            out.append((start, o - 1))
            start = o
    return out


def intersect(a: Sequence[Interval], b: Sequence[Interval]) -> list[Interval]:
    cuts = sorted({lo for lo, _ in a} | {lo for lo, _ in b})
    end = a[-1][1]
    return [(lo, (cuts[i + 1] - 1) if i + 1 < len(cuts) else end) for i, lo in enumerate(cuts)]


@dataclass(frozen=True)
class Region:
    box: tuple[Interval, ...]  # per output axis (N, O, H, W)

    def positions(self) -> list[tuple[int, ...]]:
        """Theorem 1's m + 1 positions: the corner and one step along every axis with room."""
        v0 = tuple(lo for lo, _ in self.box)
        out = [v0]
        for i, (lo, hi) in enumerate(self.box):
            if hi > lo:
                out.append(v0[:i] + (lo + 1,) + v0[i + 1:])
        return out

    def size(self) -> int:
        return int(np.prod([hi - lo + 1 for lo, hi in self.box]))


@dataclass
class Verification:
    problem: ConvProblem
    transformation: str
    axis_boxes: dict[str, dict[str, list[Interval]]]
    regions: list[Region]
    non_equivalent: list[Region]
    positions_checked: int
    positions_total: int
    tests: int
    prime: int
    n_inputs: int
    bound: float = field(init=False)

    def __post_init__(self) -> None:
        self.bound = (self.n_inputs / self.prime) ** self.tests

    @property
    def fully_equivalent(self) -> bool:
        return not self.non_equivalent


def _exact_outputs(g: Graph, values: dict[str, np.ndarray], p: int) -> np.ndarray:
    return evaluate(g, values, modp(p))[0]


def random_inputs(problem: ConvProblem, rng: np.random.Generator, p: int) -> dict[str, np.ndarray]:
    x, w = problem.leaves()
    return {"x": rng.integers(0, p, size=x.shape, dtype=np.int64),
            "w": rng.integers(0, p, size=w.shape, dtype=np.int64)}


def verify(problem: ConvProblem, t: Transformation, tests: int = 3, prime: int = MERSENNE_31, seed: int = 0
           ) -> Verification:
    """Find the regions where ``t``'s program differs from the original (Theorems 1 and 2)."""
    out_shape = problem.original().outputs[0].shape
    per_axis: dict[str, dict[str, list[Interval]]] = {}
    axes: list[list[Interval]] = [[(0, out_shape[0] - 1)], [(0, out_shape[1] - 1)]]
    for axis, size in (("H", out_shape[2]), ("W", out_shape[3])):
        mine = boxes(size, problem.K, problem.reads(axis), problem.stride)
        theirs = boxes(size, problem.K, t.reads(problem, axis), problem.stride)
        per_axis[axis] = {"original": mine, "transformed": theirs}
        axes.append(intersect(mine, theirs))
    regions = [Region(tuple(b)) for b in itertools.product(*axes)]
    original, transformed = problem.original(), t.program(problem)
    rng = np.random.default_rng(seed)
    checked = [pos for r in regions for pos in r.positions()]
    differs: set[tuple[int, ...]] = set()
    for _ in range(tests):
        values = random_inputs(problem, rng, prime)
        a, b = _exact_outputs(original, values, prime), _exact_outputs(transformed, values, prime)
        differs |= {pos for pos in checked if a[pos] != b[pos]}
    bad = [r for r in regions if any(pos in differs for pos in r.positions())]
    return Verification(problem, t.name, per_axis, regions, bad, len(checked), int(np.prod(out_shape)), tests, prime, 2)


# --------------------------------------------------------------------------- correction
@dataclass(frozen=True)
class CorrectionKernel:
    """Recompute output box ``out_box`` (H, W ranges) for all N and O with the original conv,
    reading input rows/columns ``in_box``."""

    out_box: tuple[Interval, Interval]
    in_box: tuple[Interval, Interval]

    def border_padding(self, p: ConvProblem) -> list[Interval]:
        """Zeros to add around the input sub-tensor (H, W) where it reaches past the real border."""
        span = (p.K - 1) * p.dilation
        widths = []
        for (o0, o1), size in zip(self.out_box, (p.H, p.W)):
            first, last = o0 * p.stride - p.pad, o1 * p.stride - p.pad + span
            widths.append((max(0, -first), max(0, last - (size - 1))))
        return widths

    def graph(self, p: ConvProblem) -> Graph:
        """The kernel: the original conv, unpadded, on the (border-padded) input sub-tensor."""
        (ih0, ih1), (iw0, iw1) = self.in_box
        (pt, pb), (pl, pr) = self.border_padding(p)
        xs = input_("xs", (p.N, p.C, ih1 - ih0 + 1 + pt + pb, iw1 - iw0 + 1 + pl + pr))
        w = weight("w", (p.O, p.C, p.K, p.K))
        y = node("conv2d", xs, w, stride=(p.stride, p.stride), pad=(0, 0), dilation=(p.dilation, p.dilation))
        return Graph([y], name="correction")


def correction_kernels(v: Verification) -> list[CorrectionKernel]:
    """One kernel per group of non-equivalent regions that merge into one rectangle: regions are
    merged along H first (same W range, adjacent H), then along W."""
    cells = sorted({(r.box[2], r.box[3]) for r in v.non_equivalent}, key=lambda c: (c[1], c[0]))
    merged: list[list[Interval]] = []
    for h, w in cells:
        if merged and merged[-1][1] == w and merged[-1][0][1] + 1 == h[0]:
            merged[-1][0] = (merged[-1][0][0], h[1])
        else:
            merged.append([h, w])
    by_h: list[list[Interval]] = []
    for h, w in sorted(merged, key=lambda c: (c[0], c[1])):
        if by_h and by_h[-1][0] == h and by_h[-1][1][1] + 1 == w[0]:
            by_h[-1][1] = (by_h[-1][1][0], w[1])
        else:
            by_h.append([h, w])
    p = v.problem
    kernels = []
    for h, w in by_h:
        span = (p.K - 1) * p.dilation
        ih = (max(0, h[0] * p.stride - p.pad), min(p.H - 1, h[1] * p.stride - p.pad + span))
        iw = (max(0, w[0] * p.stride - p.pad), min(p.W - 1, w[1] * p.stride - p.pad + span))
        kernels.append(CorrectionKernel((h, w), (ih, iw)))
    return kernels


def apply_corrections(problem: ConvProblem, transformed_out: np.ndarray, values: dict[str, np.ndarray],
                      kernels: Sequence[CorrectionKernel], domain: Domain = FLOAT) -> np.ndarray:
    """The corrected output: each kernel runs the original conv (unpadded) on its input
    sub-tensor, zero-padded only where it reaches past the real border, and overwrites its box."""
    out = transformed_out.copy()
    x = values["x"]
    for k in kernels:
        (ih0, ih1), (iw0, iw1) = k.in_box
        sub = pad_array(domain.asarray(x[:, :, ih0:ih1 + 1, iw0:iw1 + 1]), [(0, 0), (0, 0), *k.border_padding(problem)])
        (oh0, oh1), (ow0, ow1) = k.out_box
        out[:, :, oh0:oh1 + 1, ow0:ow1 + 1] = evaluate(k.graph(problem), {"xs": sub, "w": values["w"]}, domain)[0]
    return out


def overhead(v: Verification, kernels: Sequence[CorrectionKernel]) -> float:
    """Extra work of the corrections: recomputed output positions over all output positions."""
    p = v.problem
    spatial = p.out_size(p.H) * p.out_size(p.W)
    area = sum((k.out_box[0][1] - k.out_box[0][0] + 1) * (k.out_box[1][1] - k.out_box[1][0] + 1) for k in kernels)
    return area / spatial


@dataclass(frozen=True)
class FalsePassRate:
    prime: int
    tests: int
    passes: int  # tests in which the two programs agreed at the position
    bound: float  # n / p

    @property
    def rate(self) -> float:
        return self.passes / self.tests


def false_pass_rates(
    problem: ConvProblem,
    t: Transformation,
    position: tuple[int, ...],
    primes: Sequence[int] = (2, 3, 5, 7, 11, 13, 31, 101),
    tests: int = 3000,
    seed: int = 0,
) -> list[FalsePassRate]:
    """Theorem 2 made visible: at a position where the programs differ, how often a random input
    in GF(p) makes them agree, for small p (bound n/p with n = 2 inputs)."""
    original, transformed = problem.original(), t.program(problem)
    rng = np.random.default_rng(seed)
    out = []
    for p in primes:
        passes = 0
        for _ in range(tests):
            values = random_inputs(problem, rng, p)
            passes += int(
                _exact_outputs(original, values, p)[position] == _exact_outputs(transformed, values, p)[position]
            )
        out.append(FalsePassRate(p, tests, passes, 2 / p))
    return out
