"""One graph dynamo captured, compiled: its weight placeholders bound as weights, exported,
imported, optimized (:func:`eqsat.pytorch.optimize.optimize_import`) and checked against the
graph on the example inputs (:func:`compile_graph`). The backend (:mod:`eqsat.pytorch.backend`)
and the split around unwritable ops (:mod:`eqsat.pytorch.partition`) both compile through it.
"""
from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import torch

from eqsat.errors import UnsupportedError
from eqsat.pytorch.importer import check_same, from_exported, one_line, quiet
from eqsat.pytorch.optimize import Options, optimize_import


def _source_name(node: torch.fx.Node) -> str:
    grapharg = node.meta.get("grapharg")
    source = getattr(grapharg, "source", None)
    return source.name if isinstance(getattr(source, "name", None), str) else ""


def _is_weight(node: torch.fx.Node, value: Any) -> bool:
    """A placeholder dynamo made of a module's parameter or buffer (inlined nn modules)."""
    return isinstance(value, torch.nn.Parameter) or bool(re.search(r"\._(parameters|buffers)\[", _source_name(node)))


def _weight_name(node: torch.fx.Node, k: int) -> str:
    """``L['self']._modules['fc']._parameters['weight']`` -> ``fc_weight`` (the initializer's name)."""
    keys = re.findall(r"\['([^']+)'\]", _source_name(node))[1:]
    return re.sub(r"\W", "_", "_".join(keys))[:80] or f"weight{k}"


class _Bound(torch.nn.Module):
    """The captured graph with its weight placeholders bound to buffers, so the exported program
    takes only the real inputs and its weights become the import's ``weight`` leaves."""

    def __init__(self, gm: torch.fx.GraphModule, slots: Sequence[int], weights: Mapping[int, tuple[str, Any]]):
        super().__init__()
        self.gm, self.slots, self.names = gm, tuple(slots), {}
        for k, (name, value) in weights.items():
            while hasattr(self, name):
                name += "_"
            self.register_buffer(name, value.detach())
            self.names[k] = name
        self.n = len(slots) + len(weights)

    def forward(self, *inputs: torch.Tensor) -> Any:
        args: list[Any] = [None] * self.n
        for k, x in zip(self.slots, inputs):
            args[k] = x
        for k, name in self.names.items():
            args[k] = getattr(self, name)
        return self.gm(*args)


def graph_weights(gm: torch.fx.GraphModule, example_inputs: Sequence[Any]) -> dict[int, str]:
    """Which of dynamo's placeholders are weights (position -> a name for its initializer)."""
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    return {k: _weight_name(n, k) for k, (n, x) in enumerate(zip(placeholders, example_inputs)) if _is_weight(n, x)}


def check_inputs(example_inputs: Sequence[Any]) -> None:
    """What this backend cannot take, in one sentence: symbolic shapes, fake tensors, gradients."""
    from torch._subclasses.fake_tensor import is_fake

    if not all(isinstance(x, torch.Tensor) for x in example_inputs):
        raise UnsupportedError("the captured graph has symbolic shapes (dynamic=True or a recompile); compile "
                               "with dynamic=False")
    if any(is_fake(x) for x in example_inputs):
        raise UnsupportedError("the captured graph came with fake example inputs; eqsat needs real ones")
    if torch.is_grad_enabled() and any(x.requires_grad for x in example_inputs):
        raise UnsupportedError("eqsat optimizes inference graphs and this call needs gradients: call the compiled "
                               "model under torch.no_grad() or torch.inference_mode()")


def compile_graph(gm: torch.fx.GraphModule, example_inputs: Sequence[Any], options: Options,
                  weights: Mapping[int, str] | None = None) -> Callable[..., Any]:
    """The optimized callable for one captured graph (``weights``: which inputs are weights, by
    position, with their names; default :func:`graph_weights`), checked against the graph on
    ``example_inputs``, or an :class:`UnsupportedError` saying why not. It returns a tuple."""
    check_inputs(example_inputs)
    weights = graph_weights(gm, example_inputs) if weights is None else weights
    slots = [k for k in range(len(example_inputs)) if k not in weights]
    bound = _Bound(gm, slots, {k: (name, example_inputs[k]) for k, name in weights.items()})
    inputs = tuple(example_inputs[k] for k in slots)
    try:
        with quiet():
            ep = torch.export.export(bound, inputs, strict=False)
    except Exception as exc:
        raise UnsupportedError(f"torch.export cannot capture the graph: {one_line(exc)}") from None
    source = from_exported(ep, "dynamo")
    optimized, done = optimize_import(source, options, as_tuple=True)
    with torch.no_grad():
        expected = gm(*example_inputs)
        got = optimized(*inputs)
    differs = check_same(tuple(expected) if isinstance(expected, list) else expected, got)
    if differs:
        raise UnsupportedError(f"the optimized graph does not reproduce the captured one ({differs})")
    shapes = tuple((x.shape, x.dtype, x.device) for x in inputs)

    def run(*args: Any) -> Any:
        real = [args[k] for k in slots]
        if any((x.shape, x.dtype, x.device) != s for x, s in zip(real, shapes)):
            out = gm(*args)  # another shape than the one optimized: the captured graph runs it
            return tuple(out) if isinstance(out, (list, tuple)) else (out,)
        with torch.no_grad():
            return optimized(*real)

    run.optimized = optimized  # type: ignore[attr-defined]
    run.summary = done.summary  # type: ignore[attr-defined]
    return run
