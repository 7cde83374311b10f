"""Timing one kernel in onnxruntime's CPU provider, TASO's way: export it alone, warm up, time
repeated runs, keep the median and the spread."""
from __future__ import annotations

import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from eqsat.heap import release_freed_memory
from eqsat.ir.graph import Graph

WARMUP, RUNS = 8, 32  # TASO's numbers
FLUSH_BYTES = 64 << 20  # written before each timed run of a cold-weights kernel: more than this CPU's caches
_flush: list[np.ndarray] = []
KERNEL_SECONDS = 0.5  # a slow kernel is timed for about this long (at least MIN_RUNS runs) instead
MIN_RUNS = 5


MAX_TIME_US = 1e12  # 11.6 days for one kernel: a time past it in a file is damage, not a timing (1e308
# timings summed to inf and printed "0.00 -> 0.00 µs")


def plausible_us(x: object) -> bool:
    """A time as a file may hold one: a number, finite, positive and at most :data:`MAX_TIME_US`."""
    return isinstance(x, (int, float)) and not isinstance(x, bool) and 0 < x <= MAX_TIME_US


@dataclass(frozen=True)
class Timing:
    """Wall time of one ``session.run`` (µs): median and the 10th/90th percentiles of ``runs``."""

    median_us: float
    p10_us: float
    p90_us: float
    runs: int

    def problem(self) -> str | None:
        """Why this timing cannot be one read back from a file (a time not finite, not positive or
        past :data:`MAX_TIME_US`, a run count not a positive integer), or None."""
        for field in ("median_us", "p10_us", "p90_us"):
            if not plausible_us(getattr(self, field)):
                return f"{field} is not a time in (0, {MAX_TIME_US:g}] µs"
        if not (isinstance(self.runs, int) and not isinstance(self.runs, bool) and self.runs > 0):
            return "runs is not a positive integer"
        return None

    @classmethod
    def of(cls, us: np.ndarray, median_us: float | None = None) -> Timing:
        """The timing of run times ``us`` (µs); ``median_us`` replaces their median when given."""
        return cls(float(np.median(us)) if median_us is None else median_us, float(np.percentile(us, 10)),
                   float(np.percentile(us, 90)), len(us))


def session(path: str | Path, threads: int, level: str = "ENABLE_ALL") -> Any:
    """An onnxruntime CPU session with ``threads`` intra-op threads and one inter-op thread, of a
    model file (every timed model is written first: handed over serialized, a large one was held
    again as bytes beside onnxruntime's copy)."""
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.intra_op_num_threads, opts.inter_op_num_threads = threads, 1
    opts.graph_optimization_level = getattr(ort.GraphOptimizationLevel, f"ORT_{level}")
    return ort.InferenceSession(str(path), opts, providers=["CPUExecutionProvider"])


def constant_weights(graph: Graph) -> dict[str, np.ndarray]:
    """Weights for timing: one small value per tensor (drawing millions of random numbers would
    take longer than the timing; a dense kernel's speed does not depend on the values), each a
    read-only broadcast of one float: a 440 MB BERT's weights held no memory until written."""
    out = {}
    for leaf in graph.leaves("weight"):
        fan_in = int(np.prod(leaf.shape[1:])) if len(leaf.shape) > 1 else 1
        out[leaf.attr("name")] = np.broadcast_to(np.float32(1.0 / np.sqrt(max(fan_in, 1))), leaf.shape)
    return out


def export_for_timing(graph: Graph, path: Path, external_data: bool = False) -> Path:
    """``graph`` as a float32 ONNX file with :func:`constant_weights`, in onnxruntime's own kernels
    (FusedConv, FusedGemm: what it runs a fused IR op as); ``external_data``: the large weights'
    data in ``<path>.data`` (see :func:`eqsat.onnx.writer.write_model`)."""
    from eqsat.onnx import export_graph

    export_graph(graph, path, weights=constant_weights(graph), contrib=True, external_data=external_data)
    return path


def evict_caches(feeds: dict[str, Any]) -> None:
    """Write :data:`FLUSH_BYTES` (one float per 64-byte line), then read the inputs again: the
    kernel's weights are cold, its activations hot, as in an inference whose products read
    weights last touched one inference ago."""
    if not _flush:
        _flush.append(np.zeros(FLUSH_BYTES // 4, dtype=np.float32))
    _flush[0][::16] += 1.0
    for v in feeds.values():
        np.asarray(v).sum()


def run_us(sess: Any, feeds: dict[str, Any], cold_weights: bool = False) -> float:
    """Wall time of one ``run`` (µs), after :func:`evict_caches` with ``cold_weights``."""
    if cold_weights:
        evict_caches(feeds)
    start = time.perf_counter()
    sess.run(None, feeds)
    return (time.perf_counter() - start) * 1e6


def time_graph(graph: Graph, threads: int = 1, warmup: int = WARMUP, runs: int = RUNS, seed: int = 0,
               cold_weights: bool = False) -> Timing:
    """Export ``graph`` as float32 ONNX and time ``runs`` runs after ``warmup`` with ``threads``
    intra-op threads (each timed run after :func:`evict_caches` with ``cold_weights``). A kernel
    slower than ``KERNEL_SECONDS / runs`` gets one warm-up run and as many timed runs as fit in
    ``KERNEL_SECONDS`` (at least ``MIN_RUNS``): a 100 ms convolution would otherwise take 4 s."""
    with tempfile.TemporaryDirectory(prefix="eqsat-time-") as tmp:
        sess = session(export_for_timing(graph, Path(tmp) / "kernel.onnx"), threads)
    return time_session(sess, warmup, runs, seed, cold_weights)


def time_model(write: Callable[[Path], Path], threads: int = 1, warmup: int = WARMUP, runs: int = RUNS,
               seed: int = 0, cold_weights: bool = False) -> Timing:
    """:func:`time_graph` of the ONNX model ``write`` writes to the path it is given (an imported
    node as it was in its file: :meth:`.kernels.Kernel.write_stored_model`)."""
    with tempfile.TemporaryDirectory(prefix="eqsat-time-") as tmp:
        sess = session(write(Path(tmp) / "kernel.onnx"), threads)
    return time_session(sess, warmup, runs, seed, cold_weights)


def time_session(sess: Any, warmup: int = WARMUP, runs: int = RUNS, seed: int = 0,
                 cold_weights: bool = False) -> Timing:
    """The timing of an open session on random inputs (see :func:`time_graph`)."""
    from eqsat.onnx import random_feeds

    feeds = random_feeds(sess, seed)
    first = run_us(sess, feeds) * 1e-6
    if first * runs > KERNEL_SECONDS:
        warmup, runs = 1, max(MIN_RUNS, min(runs, int(KERNEL_SECONDS / first)))
    for _ in range(warmup - 1):
        sess.run(None, feeds)
    return Timing.of(np.array([run_us(sess, feeds, cold_weights) for _ in range(runs)]))


SESSIONS = 4  # sessions per model in an end-to-end comparison
SESSION_MEMORY = 4 << 30  # bytes of model files all sessions may hold together


def sessions_for(paths: Sequence[str | Path], wanted: int = SESSIONS, memory: int = SESSION_MEMORY) -> int:
    """Sessions per model that keep every session's weights within ``memory`` bytes."""
    total = sum(Path(p).stat().st_size for p in paths)
    return max(1, min(wanted, memory // max(total, 1)))


def time_files(paths: Sequence[str | Path], level: str = "ENABLE_ALL", runs: int = 15, seed: int = 0,
               threads: int = 1, min_seconds: float = 0.0, max_runs: int = 400,
               sessions: int | None = None, max_seconds: float | None = None, min_runs: int = 1) -> list[Timing]:
    """End-to-end latency of ONNX models that take the same inputs.

    Identical models in two sessions differ by a few percent, steadily (where each
    session's buffers landed in memory), so each model runs in ``sessions`` sessions (default
    :func:`sessions_for`), and a model's latency is the mean of its sessions' medians. After their
    warm-up runs, every round runs every session once in a seeded random order, so drift in
    the machine's speed hits all alike: at least ``runs`` runs per model and until
    ``min_seconds`` have passed (at most ``max_runs``), or, with ``max_seconds``, until that long
    has passed once each model ran ``min_runs`` times (a slow model times fewer runs). A path given
    twice is opened in sessions of its own each time (the input against itself)."""
    per = sessions if sessions is not None else sessions_for(paths)
    times = time_sessions(paths, level, runs, seed, threads, min_seconds, max_runs, per, max_seconds, min_runs)
    return [Timing.of(np.concatenate([t[k] for t in times]), median_us=float(np.mean([np.median(t[k]) for t in times])))
            for k in range(len(paths))]


ONE_WARMUP_S = 0.05  # a session whose first run took longer than this gets no second warm-up run


def time_sessions(paths: Sequence[str | Path], level: str = "ENABLE_ALL", runs: int = 15, seed: int = 0,
                  threads: int = 1, min_seconds: float = 0.0, max_runs: int = 400, sessions: int = 1,
                  max_seconds: float | None = None, min_runs: int = 1) -> list[list[np.ndarray]]:
    """The run times (µs) of ``sessions`` sessions of each model, as :func:`time_files` takes them:
    ``[session][model]``. Each session is opened once and kept for the whole timing; its first
    run is a warm-up (and a second one where the first took under :data:`ONE_WARMUP_S`)."""
    try:
        return _time_sessions(paths, level, runs, seed, threads, min_seconds, max_runs, sessions, max_seconds,
                              min_runs)
    finally:  # the sessions are closed now
        release_freed_memory()


def _time_sessions(paths: Sequence[str | Path], level: str, runs: int, seed: int, threads: int, min_seconds: float,
                   max_runs: int, per: int, max_seconds: float | None = None,
                   min_runs: int = 1) -> list[list[np.ndarray]]:
    from eqsat.onnx import random_feeds

    opened = [(j, k, session(p, threads, level)) for j in range(per) for k, p in enumerate(paths)]
    feeds = random_feeds(opened[0][2], seed)
    for _, _, s in opened:
        if run_us(s, feeds) < ONE_WARMUP_S * 1e6:
            s.run(None, feeds)
    times: list[list[float]] = [[] for _ in opened]
    rng = np.random.default_rng(seed)
    start = time.perf_counter()
    rounds = 0
    while rounds * per < max_runs and (rounds * per < runs or time.perf_counter() - start < min_seconds):
        if max_seconds is not None and rounds * per >= min_runs and time.perf_counter() - start > max_seconds:
            break
        for i in rng.permutation(len(opened)):
            times[i].append(run_us(opened[i][2], feeds))
        rounds += 1
    out: list[list[np.ndarray]] = [[np.empty(0)] * len(paths) for _ in range(per)]
    for (j, k, _), t in zip(opened, times):
        out[j][k] = np.asarray(t)
    return out


E2E_SECONDS = 3.0  # an end-to-end timing of graphs stops after this long once each session ran E2E_MIN_RUNS times
E2E_MIN_RUNS = 4  # runs per session: a 170 ms BERT, 3 sessions each of the input and the pick, times 24 runs (4 s)


def time_graph_sessions(graphs: Sequence[Graph], sessions: int, threads: int = 1, runs: int = 24,
                        min_seconds: float = 2.0, seed: int = 0, exports: dict[str, Path] | None = None,
                        folder: str | Path | None = None, max_seconds: float = E2E_SECONDS) -> list[list[Timing]]:
    """Graphs exported with :func:`constant_weights` (their data in a file beside each model,
    which onnxruntime maps: a session of a 440 MB BERT then loads in 0.25 s, not 0.8 s, and holds
    no copy of its weights), each in ``sessions`` sessions opened once and run interleaved
    (:func:`time_sessions`): ``[session][graph]`` timings. At least ``runs`` runs per graph (over
    its sessions) and ``min_seconds``, or, once ``max_seconds`` have passed, :data:`E2E_MIN_RUNS`
    runs per session. A graph given twice (the input against itself, the calibration) is exported
    once, and ``exports`` (digest -> file in ``folder``) keeps the files for the next call: the
    calibration's export of the input serves the pick's check."""
    if exports is None or folder is None:
        with tempfile.TemporaryDirectory(prefix="eqsat-time-") as tmp:
            return time_graph_sessions(graphs, sessions, threads, runs, min_seconds, seed, {}, tmp, max_seconds)
    paths = []
    for g in graphs:
        if g.digest not in exports or not exports[g.digest].exists():
            exports[g.digest] = export_for_timing(g, Path(folder) / f"graph-{g.digest[:16]}.onnx", external_data=True)
        paths.append(exports[g.digest])
    times = time_sessions(paths, runs=runs, threads=threads, min_seconds=min_seconds, seed=seed, sessions=sessions,
                          max_seconds=max_seconds, min_runs=E2E_MIN_RUNS * sessions)
    return [[Timing.of(t) for t in row] for row in times]

