"""PET's program optimizer: which convs to transform and how, on the roofline cost.

A network is a list of conv layers (:class:`ConvProblem`). For each layer the generator's
candidates (:func:`pet.programs.candidates`) are verified, corrected and priced: the transformed
program plus its correction kernels (one conv each, on the input sub-tensor it recomputes).
A beam search (width, depth and candidates per layer are parameters) picks a set of (layer,
transformation) choices with the lowest total cost; layers are independent, so a state's cost is
the sum of its layers' costs.

Verification runs on the layer's spatial configuration with small batch and channel counts: the
boxes and regions depend only on the spatial index arithmetic (sizes, kernel, stride, padding,
dilation, split), so the non-equivalent regions found there are those of the full layer.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from eqsat.cost.devices import DEFAULT_DEVICE, Device
from eqsat.cost.registry import cost_model
from eqsat.cost.roofline import CostModel
from eqsat.ir.graph import Graph
from pet.programs import ConvProblem, candidates
from pet.verify import correction_kernels, overhead, verify


@dataclass(frozen=True)
class Option:
    """One way to run a layer: the original program or a transformation with its corrections."""

    layer: int
    transformation: str
    fully_equivalent: bool
    program_us: float
    corrections_us: float
    corrections: int
    overhead: float            # corrected output share

    @property
    def total_us(self) -> float:
        return self.program_us + self.corrections_us


def layer_options(p: ConvProblem, layer: int, model: CostModel, max_candidates: int = 8) -> list[Option]:
    """The original program and every verified, corrected candidate, priced."""
    base = model.graph_time_us(p.original())
    out = [Option(layer, "none", True, base, 0.0, 0, 0.0)]
    small = replace(p, N=1, C=2, O=2)
    for t in candidates(p)[:max_candidates]:
        v = verify(small, t)
        kernels = correction_kernels(v)  # the boxes are the full layer's: they depend on spatial sizes only
        corr_us = sum(model.graph_time_us(k.graph(p)) for k in kernels)
        out.append(Option(layer, t.name, v.fully_equivalent, model.graph_time_us(t.program(p)), corr_us,
                          len(kernels), overhead(v, kernels)))
    return out


def option_graphs(p: ConvProblem, transformation: str) -> list[Graph]:
    """What runs for one option of a layer: the original conv, or the transformed program
    followed by its correction kernels (one graph each), to time them end to end."""
    if transformation == "none":
        return [p.original()]
    t = next((t for t in candidates(p) if t.name == transformation), None)
    if t is None:
        raise ValueError(f"no transformation {transformation!r} for this layer")
    kernels = correction_kernels(verify(replace(p, N=1, C=2, O=2), t))
    return [t.program(p)] + [k.graph(p) for k in kernels]


@dataclass(frozen=True)
class Plan:
    choices: tuple[Option, ...]

    @property
    def total_us(self) -> float:
        return sum(o.total_us for o in self.choices)


def beam_search(
    layers: Sequence[ConvProblem],
    device: str | Device = DEFAULT_DEVICE,
    beam_width: int = 4,
    depth: int | None = None,
    max_candidates: int = 8,
) -> tuple[Plan, Plan, list[list[Option]]]:
    """(original plan, best plan, options per layer): each step transforms one more layer in
    every beam state, keeping the ``beam_width`` cheapest states, for ``depth`` steps."""
    model = cost_model(device)
    options = [layer_options(p, i, model, max_candidates) for i, p in enumerate(layers)]
    start = Plan(tuple(o[0] for o in options))
    beam = [start]
    best = start
    for _ in range(len(layers) if depth is None else depth):
        grown: dict[tuple[str, ...], Plan] = {}
        for plan in beam:
            for i, opts in enumerate(options):
                if plan.choices[i].transformation != "none":
                    continue
                for o in opts[1:]:
                    new = Plan(plan.choices[:i] + (o,) + plan.choices[i + 1 :])
                    grown.setdefault(tuple(c.transformation for c in new.choices), new)
        if not grown:
            break
        beam = sorted(grown.values(), key=lambda pl: pl.total_us)[:beam_width]
        if beam[0].total_us < best.total_us:
            best = beam[0]
    return start, best, options


def network(name: str, batch: int = 16) -> list[ConvProblem]:
    """PET's case-study layers: ResNet-18's last stage (four 3x3 convs, 512 channels, 7x7) and
    CSRNet's dilated back-end (six 3x3 convs with dilation 2 on 14x14: 512, 512, 512, 256, 128, 64)."""
    if name == "resnet18_last":
        return [ConvProblem(batch, 512, 512, 7, 7) for _ in range(4)]
    if name == "csrnet_backend":
        chans = (512, 512, 512, 512, 256, 128, 64)
        return [ConvProblem(batch, c, o, 14, 14, pad=2, dilation=2) for c, o in zip(chans, chans[1:])]
    raise ValueError(f"unknown PET network {name!r}; choose resnet18_last or csrnet_backend")
