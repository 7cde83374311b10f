"""A captured graph split around the ops PyTorch's ONNX exporter cannot write, so that those ops
run in PyTorch itself and the rest is optimized.

An op with no ONNX function (a fused fast path such as ``aten._transformer_encoder_layer_fwd``, a
user's ``torch.library`` kernel) cannot take the route into the IR. :func:`compile_around` keeps
every call of such an op as it is, groups the other calls into connected parts
(``torch.fx``'s capability partitioner), compiles each part with
:func:`eqsat.pytorch.capture.compile_graph` on the values that part sees on the example inputs
(its weight inputs stay weights), and checks the whole graph against the captured one.
"""
from __future__ import annotations

import copy
from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch.fx.passes.infra.partitioner import CapabilityBasedPartitioner
from torch.fx.passes.operator_support import OperatorSupportBase

from eqsat.errors import UnsupportedError
from eqsat.pytorch.capture import check_inputs, compile_graph, graph_weights
from eqsat.pytorch.importer import check_same
from eqsat.pytorch.optimize import Options


def op_name(target: Any) -> str:
    """A call's op without namespace or overload: ``torch.ops.aten.relu.default``, ``torch.relu``
    and ``aten.relu`` are all ``relu``."""
    if isinstance(target, torch._ops.OpOverload):
        return target._opname
    if isinstance(target, torch._ops.OpOverloadPacket):
        return target._qualified_op_name.split("::")[-1]
    if isinstance(target, str):
        return target.split(".")[-1]
    return getattr(target, "__name__", "")


class _Writable(OperatorSupportBase):
    """Every call but those of the ops kept in PyTorch."""

    def __init__(self, kept: Sequence[str]):
        self.kept = {k.split(".")[-1] for k in kept}

    def is_node_supported(self, submodules: Any, node: torch.fx.Node) -> bool:
        return node.op in ("call_function", "call_method") and op_name(node.target) not in self.kept


class _Call(torch.nn.Module):
    """A compiled part in its place: its outputs as the part returned them (one value or a tuple)."""

    def __init__(self, run: Callable[..., Any], single: bool):
        super().__init__()
        self.run, self.single = run, single

    def forward(self, *args: Any) -> Any:
        out = self.run(*args)
        return out[0] if self.single else out


def _part_inputs(parent: torch.fx.GraphModule, names: Sequence[str], example_inputs: Sequence[Any]
                 ) -> dict[str, list[Any]]:
    """The arguments each part is called with when the split graph runs on ``example_inputs``."""
    seen: dict[str, list[Any]] = {}

    class Recorder(torch.fx.Interpreter):
        def call_module(self, target: Any, args: Any, kwargs: Any) -> Any:
            if target in names:
                seen[target] = list(args)
            return super().call_module(target, args, kwargs)

    with torch.no_grad():
        Recorder(parent).run(*example_inputs)
    return seen


def compile_around(gm: torch.fx.GraphModule, example_inputs: Sequence[Any], options: Options,
                   kept: Sequence[str]) -> Callable[..., Any]:
    """``gm`` with every call of the ops in ``kept`` (exporter names, ``aten.name``) left to
    PyTorch and each other part optimized; an :class:`UnsupportedError` when no part is left or
    the result differs (an :class:`~eqsat.pytorch.importer.ExportError` naming the next op the
    exporter cannot write passes through, so the caller can keep that op too)."""
    check_inputs(example_inputs)
    weights = graph_weights(gm, example_inputs)
    parent = copy.deepcopy(gm)
    partitioner = CapabilityBasedPartitioner(parent, _Writable(kept), allows_single_node_partition=True)
    parent = partitioner.fuse_partitions(partitioner.propose_partitions(), prefix="eqsat_part_")
    calls = [n for n in parent.graph.nodes if n.op == "call_module" and str(n.target).startswith("eqsat_part_")]
    if not calls:
        raise UnsupportedError(f"every op of the graph is one PyTorch's ONNX exporter cannot write "
                               f"({', '.join(kept)}); nothing is left to optimize")
    parent_slots = {n.name: k for k, n in enumerate(n for n in parent.graph.nodes if n.op == "placeholder")}
    args = _part_inputs(parent, [str(c.target) for c in calls], example_inputs)
    summaries = []
    for call in calls:
        name = str(call.target)
        part = getattr(parent, name)
        part_weights = {}
        for k, a in enumerate(call.args):
            slot = parent_slots.get(a.name) if isinstance(a, torch.fx.Node) and a.op == "placeholder" else None
            if slot is not None and slot in weights:
                part_weights[k] = weights[slot]
        out = part.graph.output_node().args[0]
        run = compile_graph(part, args[name], options, part_weights)
        setattr(parent, name, _Call(run, not isinstance(out, (tuple, list))))
        summaries.append(run.summary)
    parent.recompile()
    with torch.no_grad():
        expected, got = gm(*example_inputs), parent(*example_inputs)
    differs = check_same(expected, got)
    if differs:
        raise UnsupportedError(f"the graph split around {', '.join(kept)} does not reproduce the captured one "
                               f"({differs})")

    def run(*inputs: Any) -> Any:
        out = parent(*inputs)
        return tuple(out) if isinstance(out, (list, tuple)) else (out,)

    run.optimized = parent  # type: ignore[attr-defined]
    run.summary = (f"{len(calls)} part(s) around {', '.join(kept)} (run in PyTorch): "  # type: ignore[attr-defined]
                   + " | ".join(summaries))
    return run
