"""A graph of the IR as a ``torch.nn.Module``: each node runs its op-table row's ``torch`` column.

:func:`to_module` builds a :class:`GraphModule`: ``weight`` leaves become buffers (values given, or
the ones the numerical check draws, :func:`eqsat.ir.evaluate.random_leaves`), and every node whose
inputs are all constant (a transposed, concatenated or folded weight) is computed once, here, in
float64 on the CPU, and kept as a buffer, so an optimized graph's merged weights cost nothing per
call. ``forward(*inputs)`` takes the ``input`` leaves in the order of ``module.input_names`` (sorted
by name unless given) and returns a tuple of the graph's outputs; it runs a precomputed
topological order, drops each value after its last use, and has no data-dependent Python control
flow and no host syncs (unless an opaque node must run on the host, listed in ``host_ops``), so it
can be captured in a CUDA graph and traced by ``torch.compile``.

Inputs are real-valued tensors of the module's dtype, token ids too (the IR holds reals; an opaque
``Gather`` casts them to int64): float32 holds ids exactly up to 2**24, float16 only up to 2048 and
bfloat16 up to 256, so a model fed ids is run in float32.
"""
from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import torch

from eqsat.errors import ShapeError, UnsupportedError
from eqsat.ir.evaluate import random_leaves
from eqsat.ir.graph import Graph, Node, leaf_shapes
from eqsat.ir.ops import opaque_in_torch

DTYPES: dict[str, torch.dtype] = {
    "float32": torch.float32, "fp32": torch.float32, "float16": torch.float16, "fp16": torch.float16,
    "bfloat16": torch.bfloat16, "bf16": torch.bfloat16, "float64": torch.float64, "fp64": torch.float64,
}
"""The dtypes a module computes in (the project's short names, ``fp32``, ``bf16``, ..., or torch's)."""


MEMORY_FORMATS: dict[str, torch.memory_format] = {
    "contiguous": torch.contiguous_format, "channels_last": torch.channels_last,
}
"""How a module lays out its 4-D tensors (weights, inputs and every 4-D value it computes):
``contiguous`` is PyTorch's default, NCHW; ``channels_last`` stores NHWC, where oneDNN's CPU
convolutions and pools and cuDNN's tensor-core convolutions run without reordering (on this CPU,
one thread, SqueezeNet's eager call takes 15.6 ms in it against 29.5 ms). The values are the same;
only the strides differ, so the choice is the runtime's, made by measurement
(:meth:`eqsat.cost.measured.torchdev.TorchCost.choose_layout`)."""


def _named(table: Mapping[str, Any], name: str, what: str, known: str) -> Any:
    try:
        return table[name]
    except (KeyError, TypeError):
        raise UnsupportedError(f"{what} {name!r} is not supported by the PyTorch executor (known: {known})") from None


def memory_format(name: str) -> torch.memory_format:
    """The torch memory format named ``name``; one sentence naming the known ones otherwise."""
    return _named(MEMORY_FORMATS, name, "memory format", ", ".join(MEMORY_FORMATS))


def torch_dtype(name: str) -> torch.dtype:
    """The torch dtype named ``name``; one sentence naming the known ones otherwise."""
    return _named(DTYPES, name, "dtype", "float32, float16, bfloat16, float64")


def torch_device(name: str | torch.device) -> torch.device:
    """``name`` as a torch device that exists on this machine."""
    try:
        device = torch.device(name)
    except (RuntimeError, TypeError):
        raise UnsupportedError(f"device {name!r} is not a PyTorch device (e.g. cpu, cuda, cuda:1)") from None
    if device.type == "cuda" and not torch.cuda.is_available():
        raise UnsupportedError(f"device {name!r}: this PyTorch has no CUDA device (torch.cuda.is_available() "
                               f"is False)")
    return device


def _input_order(graph: Graph, input_names: Sequence[str] | None) -> tuple[str, ...]:
    names = sorted({n.attr("name") for n in graph.leaves("input")})
    if input_names is None:
        return tuple(names)
    given = tuple(input_names)
    if sorted(given) != names:
        raise ShapeError(f"input_names {list(given)} must name each input of the graph once: {names}")
    return given


class GraphModule(torch.nn.Module):
    """A graph as a module (build it with :func:`to_module`).

    ``input_names``/``input_shapes``: what ``forward`` takes, in order; ``output_shapes``: what it
    returns; ``host_ops``: opaque ONNX op types that run on the host (none: capturable in a CUDA
    graph); ``folded``: how many constant nodes were computed at construction; ``steps``: how many
    ops ``forward`` runs; ``weight_buffers``: each weight read as it is by ``forward``, by name, and
    the buffer holding it; ``layout``: the memory format of its 4-D tensors (:data:`MEMORY_FORMATS`;
    with ``channels_last`` its 4-D buffers are stored so, ``forward`` converts 4-D inputs on entry and
    returns contiguous outputs: a caller sees no difference but speed). ``dtype``, ``device`` and
    ``layout`` are fixed at construction (``forward`` checks its inputs against the first two): for
    another, build another module rather than calling ``.to()``.
    """

    def __init__(self, graph: Graph, values: Mapping[str, np.ndarray], *, device: str | torch.device = "cpu",
                 dtype: str = "float32", input_names: Sequence[str] | None = None, layout: str = "contiguous"):
        super().__init__()
        self.layout = layout
        self._format = memory_format(layout)
        self._relayout = self._format is not torch.contiguous_format
        self.dtype = torch_dtype(dtype)
        self.device = torch_device(device)
        shapes = leaf_shapes(graph)  # raises on a name used with two shapes
        self.input_names = _input_order(graph, input_names)
        self.input_shapes = tuple(shapes[n] for n in self.input_names)
        self.output_shapes = tuple(o.shape for o in graph.outputs)
        order = graph.nodes()
        missing = [n for n in order if n.spec.torch is None]
        if missing:
            raise UnsupportedError(f"op {missing[0].op!r} has no PyTorch form (its op-table row has no torch column)")
        slot = {n: k for k, n in enumerate(order)}
        runtime = [n for n in order if not n.is_const and n.op != "input"]
        needed = {x for n in runtime for x in n.inputs if x.is_const} | {o for o in graph.outputs if o.is_const}
        self.folded = sum(1 for n in needed if n.op != "weight")
        self._buffer_slots: list[tuple[str, int]] = []
        self.weight_buffers: dict[str, str] = {}
        for n, value in _fold(order, needed, values).items():
            name = _buffer_name(n, len(self._buffer_slots))
            value = value.to(device=self.device, dtype=self.dtype)
            self.register_buffer(name, value.contiguous(memory_format=self._format) if value.dim() == 4
                                 else value.contiguous())
            self._buffer_slots.append((name, slot[n]))
            if n.op == "weight":
                self.weight_buffers[n.attr("name")] = name
        inputs = {n.attr("name"): n for n in order if n.op == "input"}
        self._input_slots = tuple(slot[inputs[name]] for name in self.input_names)
        self._outputs = tuple(slot[o] for o in graph.outputs)
        last = {slot[x]: k for k, n in enumerate(runtime) for x in n.inputs}
        keep = set(self._outputs)
        self._steps = [(n.spec.torch, n.attr_dict, tuple(slot[x] for x in n.inputs), slot[n],
                        tuple(sorted({slot[x] for x in n.inputs if last[slot[x]] == k and slot[x] not in keep})))
                       for k, n in enumerate(runtime)]
        self._slots = len(order)
        self.steps = len(self._steps)
        self.host_ops = tuple(n.attr("op_type") for n in runtime
                              if n.op == "opaque" and not opaque_in_torch(n.attr_dict))

    def forward(self, *inputs: torch.Tensor) -> tuple[torch.Tensor, ...]:
        """The graph's outputs for ``inputs`` (in the order of :attr:`input_names`)."""
        if len(inputs) != len(self.input_names):
            raise ShapeError(f"the module takes {len(self.input_names)} input(s) {list(self.input_names)}, "
                             f"got {len(inputs)}")
        env: list[Any] = [None] * self._slots
        for name, shape, k, x in zip(self.input_names, self.input_shapes, self._input_slots, inputs):
            if tuple(x.shape) != shape or x.dtype != self.dtype:
                raise ShapeError(f"input {name!r} must be a {self.dtype} tensor of shape {shape}, got "
                                 f"{x.dtype} {tuple(x.shape)}")
            env[k] = x.contiguous(memory_format=self._format) if self._relayout and x.dim() == 4 else x
        for name, k in self._buffer_slots:
            env[k] = self._buffers[name]
        for fn, attrs, ins, out, free in self._steps:
            env[out] = fn(torch, attrs, [env[i] for i in ins])
            for i in free:
                env[i] = None
        if self._relayout:
            return tuple(env[k].contiguous() for k in self._outputs)
        return tuple(env[k] for k in self._outputs)

    def extra_repr(self) -> str:
        return (f"inputs={list(self.input_names)}, steps={self.steps}, buffers={len(self._buffer_slots)} "
                f"({self.folded} folded), dtype={self.dtype}, device={self.device}, layout={self.layout}")


def _buffer_name(n: Node, k: int) -> str:
    """A buffer's attribute name: the weight's own name made an identifier, or ``folded_k_op``."""
    if n.op == "weight":
        return f"w{k}_" + re.sub(r"\W", "_", n.attr("name"))[:60]
    return f"folded{k}_{n.op}"


def _fold(order: Sequence[Node], needed: set[Node], values: Mapping[str, np.ndarray]) -> dict[Node, torch.Tensor]:
    """The value of every ``needed`` constant node, computed once in float64 on the CPU through the
    op table's torch column; each intermediate value is dropped after its last constant user."""
    consts = [n for n in order if n.is_const]
    uses: dict[Node, int] = {}
    for n in consts:
        for x in n.inputs:
            uses[x] = uses.get(x, 0) + 1
    env: dict[Node, Any] = {}
    out: dict[Node, torch.Tensor] = {}
    for n in consts:
        if n.op == "weight":
            env[n] = _weight_value(n, values)
        else:
            env[n] = n.spec.torch(torch, n.attr_dict, [env[x] for x in n.inputs])
        if n in needed:
            out[n] = env[n]
        for x in n.inputs:
            uses[x] -= 1
            if not uses[x]:
                env.pop(x, None)
    return out


def _weight_value(n: Node, values: Mapping[str, np.ndarray]) -> torch.Tensor:
    name = n.attr("name")
    if name not in values:
        raise ShapeError(f"weight {name!r} of shape {n.shape} has no value in the values given")
    arr = np.asarray(values[name], dtype=np.float64)
    if arr.shape != n.shape:
        raise ShapeError(f"the value of weight {name!r} has shape {arr.shape}, the graph expects {n.shape}")
    return torch.from_numpy(arr)


def to_module(graph: Graph, values: Mapping[str, np.ndarray] | None = None, *, device: str = "cpu",
              dtype: str = "float32", seed: int = 0, input_names: Sequence[str] | None = None,
              layout: str = "contiguous") -> GraphModule:
    """``graph`` as a :class:`GraphModule` on ``device`` computing in ``dtype`` with its 4-D tensors
    in ``layout`` (:data:`MEMORY_FORMATS`). ``values`` gives the
    weights by name (default: :func:`~eqsat.ir.evaluate.random_leaves` with ``seed``, the values the
    numerical check draws, so two graphs sharing weight names get the same weights)."""
    if values is None:
        values = random_leaves(graph, seed)
    return GraphModule(graph, values, device=device, dtype=dtype, input_names=input_names, layout=layout)


def example_inputs(graph: Graph, seed: int = 0, device: str = "cpu", *, dtype: str = "float32",
                   input_names: Sequence[str] | None = None) -> tuple[torch.Tensor, ...]:
    """The inputs the numerical check draws (:func:`~eqsat.ir.evaluate.random_leaves` with ``seed``)
    as tensors, in the order of :attr:`GraphModule.input_names`."""
    values = random_leaves(graph, seed)
    dt, dev = torch_dtype(dtype), torch_device(device)
    return tuple(torch.as_tensor(np.asarray(values[name]), dtype=dt).to(dev)
                 for name in _input_order(graph, input_names))


def to_fx(module: GraphModule, inputs: Sequence[torch.Tensor]) -> torch.fx.GraphModule:
    """``module`` as one straight-line FX graph (``torch.export``, non-strict): what ``torch.compile``
    should be given. Compiling the :class:`GraphModule` itself makes dynamo guard its step table on
    every call and recompile its shared ``forward`` for every new module (measured on an H200: 320 µs
    a call for three matmuls that run in 63 µs eager, and eager fallback after eight modules)."""
    return torch.export.export(module, tuple(inputs), strict=False).module()
