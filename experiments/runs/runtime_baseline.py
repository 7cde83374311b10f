"""What onnxruntime would have done anyway (:mod:`eqsat.onnx.runtime_baseline`), and the guard
that keeps an input whose only gain is the runtime's own fusions (the ``runtime-fusions`` row of
:data:`eqsat.guards.GUARDS`), as the experiments call them."""
from __future__ import annotations

from typing import Any

from eqsat.cost.costmodel import CostModel
from eqsat.guards import RUNTIME, first_kept
from eqsat.ir.graph import Graph
from eqsat.onnx.runtime_baseline import describe, runtime_baseline  # noqa: F401  (re-exported)
from eqsat.search import SearchResult


def keep_runtime_gain(graph: Graph, result: SearchResult, model: CostModel,
                      baseline: dict[str, Any] | None = None, best: dict[str, Any] | None = None) -> SearchResult:
    """The input instead of a best graph that is no faster, by the model's ``resolution``, than
    the input after the runtime's own fusions (``baseline`` and ``best``: :func:`runtime_baseline` of
    ``graph`` and of the best graph, when the caller has them). A best graph whose whole gain is the
    runtime's would be written as the input spelled again by the exporter: work the input does not
    do, for no gain."""
    if result.best == graph:
        return result
    evidence = result.evidence(graph, model)
    evidence.runtime = baseline or runtime_baseline(graph, model)
    evidence.best_runtime = best or runtime_baseline(result.best, model)
    kept = first_kept(evidence, RUNTIME)
    return result if kept is None else result.input_kept(graph, kept)
