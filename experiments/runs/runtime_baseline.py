"""What onnxruntime would have done anyway: its own fusions applied to the input, priced.

A search's reported gain over the input includes rewrites the runtime performs by itself (a conv
and its ReLU, a conv and the BatchNormalization after it). The fusions are the rows of
:data:`eqsat.cost.measured.kernels.RUNTIME_FUSIONS`; each row names the hand-written epilogue rules
that perform it on the IR. Those rules, applied to a fixed point where the runtime could fuse
(the producer has no other user), give the graph the runtime runs; the search's gain beyond it is
the new part, and a file for a runtime is written only when there is one (:func:`keep_runtime_gain`).
"""
from __future__ import annotations

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
    resolution = max(model.resolution, 0.0)
    if after < before * (1 - resolution):
        return result
    beyond = before / after if after > 0 else 1.0
    return result.input_kept(graph,
                             f"input kept: {beyond:.3f}x beyond onnxruntime's own fusions, not faster "
                             f"by the cost model's resolution ({resolution:.0%})")
