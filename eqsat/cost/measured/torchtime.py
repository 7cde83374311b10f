"""Timing graphs as PyTorch eager runs them (the ``torch-cpu`` and ``torch-cuda`` devices): a graph
becomes the module :func:`eqsat.pytorch.module.to_module` builds (weights as buffers, weight-only
subgraphs folded once), called under ``torch.inference_mode`` with the device's thread count.

On a CPU each call is timed on the wall clock. On a GPU each call is timed by CUDA events around
it: a kernel's calls are issued back to back, as a model issues its kernels, so a call costs the
larger of its launch and its GPU work; a whole graph's calls are each waited for, the latency of
one inference. :func:`cuda_graph_us` replays a call captured in a CUDA graph, one launch for all
its kernels: against the eager time it gives the launch overhead.

Weights are :func:`.timer.constant_weights` (a dense kernel's speed does not depend on the
values; drawing millions of random numbers would take longer than the timing); inputs are drawn
from a seeded generator. Inputs are contiguous, as a module's buffers are: a kernel that reads a
strided view in the model is timed on a contiguous copy (the calibration absorbs the difference).
"""
from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from itertools import cycle
from typing import Any

import numpy as np
import torch

from eqsat.cost.measured.timer import (
    FLUSH_BYTES,
    KERNEL_SECONDS,
    MIN_RUNS,
    Timing,
    constant_weights,
)
from eqsat.heap import release_freed_memory
from eqsat.ir.graph import Graph
from eqsat.pytorch.module import GraphModule, to_module, torch_dtype
from eqsat.pytorch.timing import cuda_graph, is_cuda, time_block

Call = Callable[[], Any]
END_TO_END_SECONDS = 2.0  # an end-to-end timing lasts at least this long (ort-cpu's figure)
END_TO_END_ROUNDS = 8  # ... and calls each module at least this many times (a slow model: only these)
MAX_COPIES = 64  # modules a cold-weights kernel rotates over at most (small weights need many to fill the caches)


@contextmanager
def torch_threads(threads: int) -> Iterator[None]:
    """PyTorch's intra-op thread count set to ``threads`` while timing, restored after."""
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def timing_weights(graph: Graph) -> dict[str, np.ndarray]:
    """:func:`.timer.constant_weights`, except the weights the graph fixes (an exponent, an epsilon)."""
    return constant_weights(graph) | {k: np.asarray(v) for k, v in graph.fixed.items()}


def build(graph: Graph, device: str, dtype: str, seed: int = 0,
          layout: str = "contiguous") -> tuple[GraphModule, tuple[torch.Tensor, ...]]:
    """``graph`` as a module on ``device`` in ``dtype`` with its 4-D tensors in ``layout``, and
    standard-normal inputs drawn with ``seed`` (contiguous, as a caller passes them)."""
    module = to_module(graph, timing_weights(graph), device=device, dtype=dtype, layout=layout)
    gen = torch.Generator().manual_seed(seed)
    inputs = tuple(torch.randn(shape, generator=gen).to(device=module.device, dtype=module.dtype)
                   for shape in module.input_shapes)
    return module, inputs


def block_us(fn: Call, runs: int, cuda: bool) -> list[float]:
    """``runs`` calls of ``fn`` (µs each): :func:`eqsat.pytorch.timing.time_block`, CUDA events
    around each call, issued back to back, on a GPU; the wall clock on a CPU."""
    return time_block(fn, "cuda" if cuda else "cpu", runs)


def time_calls(fn: Call, cuda: bool, warmup: int, runs: int) -> Timing:
    """``fn`` timed after a first call and ``warmup`` more: ``runs`` calls, or as many as fit in
    :data:`.timer.KERNEL_SECONDS` (at least :data:`.timer.MIN_RUNS`) for a slow one."""
    fn()  # the first call allocates, picks algorithms, loads libraries
    first = block_us(fn, 1, cuda)[0] * 1e-6
    if first * runs > KERNEL_SECONDS:
        warmup, runs = 0, max(MIN_RUNS, min(runs, int(KERNEL_SECONDS / max(first, 1e-9))))
    for _ in range(max(warmup - 2, 0)):
        fn()
    return Timing.of(np.array(block_us(fn, runs, cuda)))


def weight_copies(graph: Graph, dtype: str) -> int:
    """How many copies of ``graph``'s weights hold more than :data:`.timer.FLUSH_BYTES` (at most
    :data:`MAX_COPIES`)."""
    nbytes = sum(int(np.prod(w.shape)) for w in graph.leaves("weight")) * torch_dtype(dtype).itemsize
    return max(1, min(MAX_COPIES, -(-FLUSH_BYTES // max(nbytes, 1))))


def time_graph(graph: Graph, device: str = "cpu", dtype: str = "float32", threads: int = 1, warmup: int = 8,
               runs: int = 32, cold_weights: bool = False) -> Timing:
    """One call of ``graph``'s module timed ``runs`` times (see :func:`time_calls`). With
    ``cold_weights`` the calls rotate over :func:`weight_copies` modules, each with weights of its
    own, so a call reads weights last touched that many calls ago (a product's weights in an
    inference were last read one inference ago) while PyTorch's own code and data stay in cache,
    as they do in a model: flushing the caches before each call (:func:`.timer.evict_caches`, what
    ``ort-cpu`` does) made a 16x64 by 64x64 product cost 109 µs, ten times its share of a model."""
    cuda = is_cuda(device)
    with torch_threads(threads), torch.inference_mode():
        module, inputs = build(graph, device, dtype)
        copies = [module] + [to_module(graph, timing_weights(graph), device=device, dtype=dtype)
                             for _ in range(weight_copies(graph, dtype) - 1 if cold_weights else 0)]
        turn = cycle(copies)
        return time_calls(lambda: next(turn)(*inputs), cuda, warmup, runs)


def cuda_graph_us(graph: Graph, device: str = "cuda", dtype: str = "float32", runs: int = 200) -> Timing:
    """One call of ``graph``'s module captured in a CUDA graph and replayed (one launch for all
    its kernels), timed as :func:`time_graph` times an eager call."""
    with torch.inference_mode():
        module, inputs = build(graph, device, dtype)
        replay = cuda_graph(lambda: module(*inputs))
        return time_calls(replay, True, 8, runs)


def time_graphs(graphs: Sequence[Graph], device: str = "cpu", dtype: str = "float32", threads: int = 1,
                runs: int = END_TO_END_ROUNDS, min_seconds: float | None = None, seed: int = 0, max_runs: int = 400,
                layouts: Sequence[str] | None = None) -> list[Timing]:
    """End-to-end latency of graphs that take the same inputs (each in its ``layouts`` entry,
    default contiguous), interleaved: after two warm-up calls each, every round calls every module
    once in a seeded random order (so drift in the machine's speed hits all alike), at least
    ``runs`` rounds (default :data:`END_TO_END_ROUNDS`: 24 made VGG-19's calibration and layout
    choice 48 s each) and until ``min_seconds`` have passed (at most
    ``max_runs``; default :data:`END_TO_END_SECONDS`). On a GPU each call is waited for: one
    inference's latency."""
    cuda = is_cuda(device)
    min_seconds = END_TO_END_SECONDS if min_seconds is None else min_seconds
    try:
        with torch_threads(threads), torch.inference_mode():
            built = [build(g, device, dtype, seed, layout)
                     for g, layout in zip(graphs, layouts or ["contiguous"] * len(graphs), strict=True)]
            fns = [(lambda m=m, x=x: m(*x)) for m, x in built]
            for fn in fns:
                fn()
                fn()
            times: list[list[float]] = [[] for _ in fns]
            rng = np.random.default_rng(seed)
            start, rounds = time.perf_counter(), 0
            while rounds < max_runs and (rounds < runs or time.perf_counter() - start < min_seconds):
                for i in rng.permutation(len(fns)):
                    times[i] += block_us(fns[i], 1, cuda)
                rounds += 1
            return [Timing.of(np.array(t)) for t in times]
    finally:
        if cuda:
            torch.cuda.empty_cache()
        release_freed_memory()
