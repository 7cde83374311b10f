"""PET on any model, as a search of the :class:`eqsat.search.Search` interface.

The model's conv layers (:func:`pet.splice.conv_layers`) are PET's subprograms; the beam search of
:mod:`pet.optimizer` chooses which to transform and how, on the run's cost model; the chosen
transformations are spliced into the graph with their corrections, and the graph that results is
priced as written (the assembly's concats included). When that price is not below the input's, the
input is kept. Like every search, the result is checked numerically against the input by
:func:`eqsat.search.run_verified`; PET reads no rules.
"""
from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from eqsat.cost.costmodel import CostModel
from eqsat.guards import Kept
from eqsat.ir.graph import Graph
from eqsat.rules.rulefile import Rule
from eqsat.search import SearchResult
from pet.optimizer import Option, beam_search
from pet.splice import conv_layers, replace_nodes, transformed_layer


@dataclass(frozen=True)
class PetLimits:
    """Beam width, layers transformed at most (None: all), transformations tried per layer."""

    beam_width: int = 4
    depth: int | None = None
    max_candidates: int = 8


@dataclass(frozen=True)
class PetWork:
    """What PET did: the layers it could transform, the chosen transformations, the beam's
    predicted cost (program plus corrections, no assembly) and the written graph's price."""

    limits: PetLimits
    layers: int
    convs: int
    chosen: tuple[Option, ...]
    predicted_us: float
    written_us: float

    def summary(self) -> str:
        return f"{len(self.chosen)} of {self.layers} transformable convs ({self.convs} in all) transformed"

    def detail_lines(self) -> list[str]:
        lines = [f"layer {o.layer:3d}: {o.transformation:18s} program {o.program_us:9.2f} µs + "
                 f"{o.corrections} corrections {o.corrections_us:8.2f} µs (corrected share {o.overhead:.1%})"
                 for o in self.chosen]
        return lines + [f"beam's prediction {self.predicted_us:.2f} µs; the spliced graph as written "
                        f"{self.written_us:.2f} µs"]

    def to_dict(self) -> dict[str, Any]:
        return {"beam_width": self.limits.beam_width, "depth": self.limits.depth,
                "max_candidates": self.limits.max_candidates, "layers": self.layers, "convs": self.convs,
                "chosen": [asdict(o) for o in self.chosen], "predicted_us": self.predicted_us,
                "written_us": self.written_us}


class PetSearch:
    """PET's optimizer on the Search interface. Presets: ``pet-paper`` (beam 4, every layer, 8
    candidates a layer), ``quick`` (beam 2, at most 2 layers, 4 candidates)."""

    name = "pet"
    presets: Mapping[str, PetLimits] = {"pet-paper": PetLimits(), "quick": PetLimits(2, 2, 4)}
    default_preset = "pet-paper"
    default_rule_sets: tuple[str, ...] = ()  # PET's transformations come from its generator, not rules

    def limits(self, preset: str, model: str = "") -> PetLimits:
        return self.presets[preset]

    def warm(self) -> None:
        """Nothing to start: PET runs in this process."""

    def run(self, graph: Graph, rules: Sequence[Rule], cost_model: CostModel, limits: PetLimits) -> SearchResult:
        start = time.perf_counter()
        original_us = cost_model.graph_time_us(graph)
        layers = conv_layers(graph)
        convs = sum(n.op == "conv2d" for n in graph.nodes())
        best, predicted_us, chosen = graph, original_us, ()
        if layers:
            start_plan, plan, _ = beam_search([p for _, p in layers], cost_model, limits.beam_width, limits.depth,
                                              limits.max_candidates)
            chosen = tuple(o for o in plan.choices if o.transformation != "none")
            predicted_us = original_us + plan.total_us - start_plan.total_us
        if chosen:
            best = replace_nodes(graph, {layers[o.layer][0]: transformed_layer(*layers[o.layer], o.transformation)
                                         for o in chosen})
        written_us = cost_model.graph_time_us(best)
        stop = "beam done" if chosen else "no transformation pays"
        kept = None
        if chosen and not written_us < original_us:  # PET's own guard: its plan's sum is not the graph's price
            stop = f"input kept: the spliced graph prices at {written_us:.2f} µs, not below the input"
            kept = Kept("spliced-price", stop, original_us, written_us)
            best = graph
        work = PetWork(limits, len(layers), convs, chosen, predicted_us, written_us)
        best_us = original_us if best is graph else written_us
        return SearchResult("pet", graph.name, cost_model.name, original_us, best_us, best,
                            time.perf_counter() - start, stop, work, kept=kept)
