"""The CLI's side of writing an ONNX model: ``--out`` is required, and two files timed against
each other. The writing itself (checked in onnxruntime, never over the input) and the written
file's price live in :mod:`eqsat.onnx.written`, re-exported here."""
from __future__ import annotations

from eqsat.onnx.written import AGREE, TOLERANCE, export_best, written_cost  # noqa: F401  (re-exported)


def check_out_path(model: str, out: str | None) -> None:
    """Refuse a missing ``--out`` (that it is no input, no other output and writable the CLI checks
    for every command: :func:`experiments.command.check_paths`)."""
    if not out:
        raise ValueError("optimizing an .onnx file needs --out for the optimized model")


ORT_LEVELS = ("ENABLE_ALL", "DISABLE_ALL")


def ort_latency_ms(before: str, after: str, level: str, runs: int = 15, seed: int = 0) -> tuple[float, float]:
    """Median onnxruntime CPU latency (ms) of two models on the same inputs, 1 thread, run
    alternately (:func:`eqsat.cost.measured.timer.time_files`) with graph optimizations ``level``."""
    from eqsat.cost.measured.timer import time_files

    a, b = time_files([before, after], level, runs, seed)
    return a.median_us / 1e3, b.median_us / 1e3
