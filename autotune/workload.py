"""Workloads: C[M, N] = epilogue(A[M, K] · B[K, N]), or a kernel of another kind seen as that GEMM,
and the named reference shapes."""
from __future__ import annotations

import math
from dataclasses import dataclass

EPILOGUES = ("none", "relu")
KINDS: dict[str, str] = {  # kind -> what M, N, K and batch mean (the GEMM the tuners' knobs tile)
    "matmul": "C[M, N] = A[M, K] B[K, N]",
    "bmm": "batch independent matmuls C[b, M, N] = A[b, M, K] B[b, K, N]",
    "conv3x3": "a 3x3, stride-1, same-padded NHWC conv of batch square images as implicit GEMM: "
               "M = H*W output pixels per image, N output channels, K = 9 x input channels",
}


@dataclass(frozen=True)
class Workload:
    """A matmul problem; ``key`` identifies it in record files and autotune caches."""

    M: int
    N: int
    K: int
    epilogue: str = "none"
    name: str = ""
    kind: str = "matmul"
    batch: int = 1

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"workload {self.name or '?'}: unknown kind {self.kind!r}; choose from {', '.join(KINDS)}")
        for dim in ("M", "N", "K", "batch"):
            value = getattr(self, dim)
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"workload {self.name or '?'}: {dim} must be a positive int, got {value!r}")
        if self.epilogue not in EPILOGUES:
            raise ValueError(
                f"workload {self.name or '?'}: unknown epilogue {self.epilogue!r}; choose from {EPILOGUES}"
            )
        if self.kind == "conv3x3" and (math.isqrt(self.M) ** 2 != self.M or self.K % 9):
            raise ValueError(f"workload {self.name or '?'}: a conv3x3 needs M = H*H (square images) and K = 9 x "
                             f"input channels, got M={self.M}, K={self.K}")

    @property
    def image(self) -> tuple[int, int, int, int]:
        """A conv3x3's (images, height = width, input channels, output channels)."""
        side = math.isqrt(self.M)
        return self.batch, side, self.K // 9, self.N

    @property
    def key(self) -> str:
        head = self.kind if self.batch == 1 else f"{self.kind}{self.batch}"
        return f"{head}_{self.M}x{self.N}x{self.K}" + ("" if self.epilogue == "none" else f"_{self.epilogue}")

    @property
    def flops(self) -> int:
        return 2 * self.batch * self.M * self.N * self.K

    def with_m(self, m: int) -> Workload:
        return Workload(m, self.N, self.K, self.epilogue, f"{self.name}@M={m}", self.kind, self.batch)


SHAPES: dict[str, Workload] = {
    w.name: w
    for w in (
        Workload(4096, 4096, 4096, name="square"),
        Workload(2048, 4096, 4096, name="prefill"),  # 2048 tokens through a 4096x4096 projection
        Workload(16, 4096, 4096, name="decode"),  # a decode batch of 16 tokens
        Workload(512, 512, 32768, name="wgrad"),  # dW = X^T dY over 32768 tokens
        Workload(2048, 11008, 4096, name="ffn_up"),
        Workload(2048, 4096, 11008, name="ffn_down"),
        Workload(2048, 12288, 4096, name="prefill_qkv"),  # Q, K and V projections fused
        Workload(512, 512, 512, name="small"),
    )
}


def get_workload(name_or_mnk: str) -> Workload:
    """A named shape, or ``MxNxK`` (optionally ``MxNxK+relu``), or ``bmmB:MxNxK`` (B batched
    matmuls), or ``conv3x3:NxHxCxF`` (N images of HxH with C channels in, F out)."""
    if name_or_mnk in SHAPES:
        return SHAPES[name_or_mnk]
    head, colon, rest = name_or_mnk.partition(":")
    if colon:
        return _kind_workload(name_or_mnk, head, rest)
    text, _, epilogue = name_or_mnk.partition("+")
    try:
        m, n, k = (int(x) for x in text.lower().split("x"))
    except ValueError:
        raise ValueError(f"unknown shape {name_or_mnk!r}: use one of {', '.join(SHAPES)} or MxNxK") from None
    return Workload(m, n, k, epilogue or "none", name=name_or_mnk)


def _kind_workload(name: str, head: str, dims: str) -> Workload:
    try:
        values = [int(x) for x in dims.lower().split("x")]
        if head.startswith("bmm") and len(values) == 3:
            return Workload(*values, name=name, kind="bmm", batch=int(head[3:] or 1))
        if head == "conv3x3" and len(values) == 4:
            n, h, c, f = values
            return Workload(h * h, f, 9 * c, name=name, kind="conv3x3", batch=n)
    except ValueError:
        pass
    raise ValueError(f"unknown shape {name!r}: use bmmB:MxNxK (B batched matmuls) or conv3x3:NxHxCxF "
                     f"(N images of HxH, C channels in, F out)")


def random_shapes(count: int, seed: int, low: int = 16, high: int = 16384) -> list[Workload]:
    """``count`` shapes a user might bring: M, N and K log-uniform in [low, high] and never a power
    of two (real layers are 3000-odd wide as often as 4096), drawn from ``seed``."""
    import numpy as np

    rng = np.random.default_rng(seed)
    out: list[Workload] = []
    while len(out) < count:
        dims = np.exp(rng.uniform(np.log(low), np.log(high), size=3)).astype(int)
        dims = [int(d) + 1 if int(d) & (int(d) - 1) == 0 else int(d) for d in dims]
        name = "x".join(map(str, dims))
        out.append(Workload(*dims, name=name))
    return out
