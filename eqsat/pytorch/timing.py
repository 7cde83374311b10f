"""Timing PyTorch callables the way a user runs them: warm-up first, CUDA events on a GPU (the
GPU's own clock, launch gaps included), interleaved rounds so two variants share the machine's
drift, and the median of many runs.

Why interleaved: on a shared CPU two back-to-back blocks of runs can differ by 5% with no change
between them; alternating short rounds of each variant puts the same drift on both.
"""
from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Timing:
    """Runs of one callable in microseconds: their median and spread (10th to 90th percentile)."""

    runs_us: tuple[float, ...]

    @property
    def median_us(self) -> float:
        return statistics.median(self.runs_us)

    @property
    def spread(self) -> float:
        """(p90 - p10) / median: the run-to-run noise of this timing."""
        ordered = sorted(self.runs_us)
        lo, hi = ordered[len(ordered) // 10], ordered[(len(ordered) * 9) // 10 - (len(ordered) % 10 == 0)]
        return (hi - lo) / self.median_us if self.median_us > 0 else 0.0

    def to_dict(self) -> dict[str, float]:
        return {"median_us": self.median_us, "spread": self.spread, "runs": len(self.runs_us)}


def is_cuda(device: str) -> bool:
    return str(device).startswith("cuda")


def time_block(fn: Callable[[], Any], device: str, runs: int) -> list[float]:
    """``runs`` calls of ``fn``, each timed alone, in µs: CUDA events on a GPU, the wall clock on a CPU."""
    import torch

    if is_cuda(device):
        events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(runs)]
        for start, end in events:
            start.record()
            fn()
            end.record()
        torch.cuda.synchronize()
        return [start.elapsed_time(end) * 1e3 for start, end in events]
    out = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()
        out.append((time.perf_counter() - t0) * 1e6)
    return out


def warm(fn: Callable[[], Any], device: str, calls: int) -> None:
    """Run ``fn`` ``calls`` times and wait for the device (allocator, cuBLAS heuristics, caches)."""
    import torch

    for _ in range(calls):
        fn()
    if is_cuda(device):
        torch.cuda.synchronize()


def interleaved(fns: Mapping[str, Callable[[], Any]], device: str, runs: int, rounds: int = 8,
                warmup: int = 3) -> dict[str, Timing]:
    """Each callable timed ``runs`` times in all, in ``rounds`` alternating blocks, after ``warmup``
    calls each; returns one :class:`Timing` per name."""
    for fn in fns.values():
        warm(fn, device, warmup)
    per_round = max(1, -(-runs // rounds))
    times: dict[str, list[float]] = {name: [] for name in fns}
    for _ in range(rounds):
        for name, fn in fns.items():
            times[name] += time_block(fn, device, per_round)
    return {name: Timing(tuple(ts)) for name, ts in times.items()}


def cuda_graph(fn: Callable[[], Any]) -> Callable[[], Any]:
    """``fn`` captured once in a CUDA graph; the returned callable replays it (one launch for the
    whole graph: what a runtime that removes launch overhead gets). Raises when ``fn`` cannot be
    captured (a host round trip, as an opaque node run by onnxruntime makes)."""
    import torch

    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for _ in range(3):
            fn()
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        fn()
    return graph.replay


def relative_difference(a: Sequence[Any], b: Sequence[Any]) -> float:
    """max |a - b| over max |a|, over every output pair (float64 on the CPU)."""
    worst = 0.0
    for x, y in zip(a, b):
        x, y = x.detach().double().cpu(), y.detach().double().cpu()
        scale = float(x.abs().max()) if x.numel() else 0.0
        diff = float((x - y).abs().max()) if x.numel() else 0.0
        worst = max(worst, diff / scale if scale > 0 else diff)
    return worst
