"""What onnxruntime would have done anyway: its own fusions applied to the input, priced.

A search's reported gain over the input includes rewrites the runtime performs by itself (a conv
and its ReLU, a conv and the BatchNormalization after it). The fusions are the rows of
:data:`eqsat.cost.measured.kernels.RUNTIME_FUSIONS`; each row names the hand-written epilogue rules
that perform it on the IR. Those rules, applied to a fixed point where the runtime could fuse
(the producer has no other user), give the graph the runtime runs; the search's gain beyond it is
the new part, and a file for a runtime is written only when there is one (the ``runtime-fusions``
guard of :mod:`eqsat.guards`).
"""
from __future__ import annotations

from typing import Any

from eqsat.cost.costmodel import CostModel
from eqsat.ir.graph import Graph


def runtime_baseline(graph: Graph, model: CostModel) -> dict[str, Any]:
    """``runtime_us`` (the input after onnxruntime's fusions, priced by ``model``) and
    ``runtime_fusions`` (how many of each fusion it would apply)."""
    from eqsat.cost.measured.kernels import RUNTIME_FUSIONS
    from eqsat.rewriting.fixpoint import rewrite_to_fixpoint  # greedy rewriting, no search
    from eqsat.rules.rulesets import EPILOGUE, default_rules

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
