"""What onnxruntime would have done anyway: its own fusions applied to the input, priced.

A search's reported gain over the input includes rewrites the runtime performs by itself (a conv
and its ReLU, a conv and the BatchNormalization after it). The fusions are the rows of
:data:`eqsat.cost.measured.kernels.RUNTIME_FUSIONS`; each row names the hand-written epilogue rules
that perform it on the IR. Those rules, applied to a fixed point where the runtime could fuse
(the producer has no other user), give the graph the runtime runs; the search's gain beyond it is
the new part, and a file for a runtime is written only when there is one (:func:`keep_runtime_gain`)
by more than the noise and, run in onnxruntime, it is not slower than the input (:func:`input_instead`).
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from eqsat.cost.costmodel import CostModel
from eqsat.ir.graph import Graph
from eqsat.search import SearchResult


def runtime_baseline(graph: Graph, model: CostModel) -> dict[str, Any]:
    """``runtime_us`` (the input after onnxruntime's fusions, priced by ``model``) and
    ``runtime_fusions`` (how many of each fusion it would apply)."""
    from eqsat.cost.measured.kernels import RUNTIME_FUSIONS
    from eqsat.rules.rulesets import EPILOGUE, default_rules
    from taso_baseline.fixpoint import rewrite_to_fixpoint

    fusion_of = {rule: f.name for f in RUNTIME_FUSIONS for rule in f.rules}
    rules = [r for r in default_rules((EPILOGUE,)) if r.name in fusion_of]
    done = rewrite_to_fixpoint(graph, rules, model)
    counts: dict[str, int] = {}
    for rule, k in done.fired.items():
        counts[fusion_of[rule]] = counts.get(fusion_of[rule], 0) + k
    return {"runtime_us": done.cost_us, "runtime_fusions": counts}


def describe(row: dict[str, Any], best_us: float) -> str:
    """One line for the user: what the runtime does alone, and the gain beyond it."""
    fused = ", ".join(f"{name} x{k}" for name, k in sorted(row["runtime_fusions"].items())) or "nothing"
    beyond = (row["runtime_us"] / best_us - 1) * 100 if best_us > 0 else 0.0
    return (f"onnxruntime alone would apply {fused}: {row['runtime_us']:.2f} µs; "
            f"the search's gain beyond that: {beyond:+.1f}%")


def keep_runtime_gain(graph: Graph, result: SearchResult, model: CostModel,
                      baseline: dict[str, Any] | None = None, best: dict[str, Any] | None = None) -> SearchResult:
    """The input instead of a best graph that is no faster, by the model's ``resolution``, than
    the input after the runtime's own fusions (``baseline`` and ``best``: :func:`runtime_baseline` of
    ``graph`` and of the best graph, when the caller has them).

    For a model of kernels alone (a roofline), the search's gain over the raw input includes the
    fusions onnxruntime makes by itself; a standard file writes those fusions back unfused (a Conv
    then its activation). A best graph whose whole gain is the runtime's would be written as the
    input spelled again by the exporter (a global ReduceMean as AveragePool, reshapes around a
    broadcast Mul): work the input does not do, for no gain. Such a file is the input copied."""
    if result.best == graph:
        return result
    before = (baseline or runtime_baseline(graph, model))["runtime_us"]
    after = (best or runtime_baseline(result.best, model))["runtime_us"]
    margin = resolution(model)
    if after < before * (1 - margin):
        return result
    beyond = before / after if after > 0 else 1.0
    return result.input_kept(graph,
                             f"input kept: {beyond:.3f}x beyond onnxruntime's own fusions, not faster "
                             f"by the cost model's resolution ({margin:.0%}; the noise for a roofline)")


ROOFLINE_NOISE = 0.03
"""The least gain beyond onnxruntime's own fusions a file priced on a roofline must show: the noise
band of onnxruntime's end-to-end timings on this CPU (issue 53: +-3% over twenty-two models)."""
SLOWER_FLOOR = 0.02  # a written file measured slower than this (below 0.98x), and beyond the noise, is not written
GUARD_RUNS = 40  # interleaved runs per file in the written-file check


def resolution(model: CostModel) -> float:
    """The relative gain a search's file must show over the input after onnxruntime's fusions (the
    callers' model prices kernels alone): its own resolution, at least :data:`ROOFLINE_NOISE`."""
    return max(model.resolution, ROOFLINE_NOISE)


def measured_gain(before: str | Path, after: str | Path, runs: int = GUARD_RUNS, seed: int = 0) -> dict[str, Any]:
    """``after`` against ``before`` in onnxruntime on this CPU (``ORT_ENABLE_ALL``, one thread): the
    medians of ``runs`` interleaved runs of the input in two sessions and of ``after``
    (:func:`eqsat.cost.measured.timer.time_files`). ``ratio`` is the input's time over ``after``'s
    (above 1: faster), ``noise`` the input against itself (``|1 - a/b|``), ``slower`` whether the
    ratio is below 1 by more than the noise and :data:`SLOWER_FLOOR`."""
    from eqsat.cost.measured.timer import time_files

    c, a, b = time_files([after, before, before], runs=runs, seed=seed)  # the inputs sized as ``after`` is
    noise = abs(1 - a.median_us / b.median_us) if b.median_us > 0 else 0.0
    input_us = (a.median_us + b.median_us) / 2
    ratio = input_us / c.median_us if c.median_us > 0 else 1.0
    return {"input_us": input_us, "written_us": c.median_us, "ratio": ratio, "noise": noise, "runs": runs,
            "slower": ratio < 1 - max(noise, SLOWER_FLOOR)}


def input_instead(model: CostModel, runtime: dict[str, Any], written: dict[str, Any], before: str | Path,
                  after: str | Path) -> dict[str, Any] | None:
    """Why the input, not the file ``after`` written for a search priced on a model of kernels alone
    (a roofline), is the file: None when the file stands. The file as written, priced after
    onnxruntime's own fusions (``written``: :func:`experiments.onnx_io.written_cost`'s row), must
    beat ``runtime`` (:func:`runtime_baseline` of the input) by :func:`resolution` (the noise, for
    a roofline); then, run in onnxruntime here, it must not be slower than the input beyond the
    noise in two measurements (:func:`measured_gain`): a roofline prices kernels on a device the file may never run on,
    and HF LLaMA's file priced for h100 ran 0.913x its input here. Returns ``line`` (to print),
    ``stop`` (the result's stop reason) and ``measured`` (the measurement, when one ran)."""
    written_us, margin = written["written_us"], resolution(model)
    if not written_us < runtime["runtime_us"] * (1 - margin):
        # the file as written (a standard file cannot hold every fusion the search priced) runs no
        # faster than the input as onnxruntime runs it: the input is the file
        gain = runtime["runtime_us"] / written_us if written_us > 0 else 1.0
        return {"line": f"the written file is {gain:.3f}x the input as onnxruntime runs it, not faster by "
                        f"{margin:.0%} (the cost model's resolution, or the noise for a roofline): the input is "
                        f"written instead",
                "stop": f"input written: the file as written is {gain:.3f}x", "measured": None}
    check = measured_gain(before, after)
    if check["slower"]:  # confirmed by a second measurement, in fresh sessions and another order
        again = measured_gain(before, after, seed=1)
        check = again | {"ratio": (check["ratio"] + again["ratio"]) / 2, "noise": max(check["noise"], again["noise"]),
                         "runs": check["runs"] + again["runs"], "slower": again["slower"]}
    if not check["slower"]:
        return None
    return {"line": f"the written file runs {check['ratio']:.3f}x the input in onnxruntime on this CPU (medians "
                    f"of {check['runs']} interleaved runs; the input against itself {check['noise']:.1%}): slower "
                    f"beyond the noise, so the input is written instead",
            "stop": f"input written: the file runs {check['ratio']:.3f}x in onnxruntime (noise {check['noise']:.1%})",
            "measured": check}
