"""Matmul workloads: C[M, N] = epilogue(A[M, K] · B[K, N]), and the named reference shapes."""
from __future__ import annotations

from dataclasses import dataclass

EPILOGUES = ("none", "relu")


@dataclass(frozen=True)
class Workload:
    """A matmul problem; ``key`` identifies it in record files and autotune caches."""

    M: int
    N: int
    K: int
    epilogue: str = "none"
    name: str = ""

    def __post_init__(self) -> None:
        for dim in ("M", "N", "K"):
            value = getattr(self, dim)
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"workload {self.name or '?'}: {dim} must be a positive int, got {value!r}")
        if self.epilogue not in EPILOGUES:
            raise ValueError(
                f"workload {self.name or '?'}: unknown epilogue {self.epilogue!r}; choose from {EPILOGUES}"
            )

    @property
    def key(self) -> str:
        return f"matmul_{self.M}x{self.N}x{self.K}" + ("" if self.epilogue == "none" else f"_{self.epilogue}")

    @property
    def flops(self) -> int:
        return 2 * self.M * self.N * self.K

    def with_m(self, m: int) -> Workload:
        return Workload(m, self.N, self.K, self.epilogue, f"{self.name}@M={m}")


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
    """A named shape, or ``MxNxK`` (optionally ``MxNxK+relu``)."""
    if name_or_mnk in SHAPES:
        return SHAPES[name_or_mnk]
    text, _, epilogue = name_or_mnk.partition("+")
    try:
        m, n, k = (int(x) for x in text.lower().split("x"))
    except ValueError:
        raise ValueError(f"unknown shape {name_or_mnk!r}: use one of {', '.join(SHAPES)} or MxNxK") from None
    return Workload(m, n, k, epilogue or "none", name=name_or_mnk)


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
