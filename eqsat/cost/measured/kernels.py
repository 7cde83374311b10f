"""What the runtime runs as one kernel, as a value: the unit a measured cost model times.

A :class:`Kernel` is an op with its attributes, the shapes of its inputs and which of them are
weights (onnxruntime pre-packs a constant weight, so ``x @ W`` and ``x @ y`` are different
kernels), optionally followed by ops the runtime fuses into it (a bias add after a 2-D product
is one Gemm). Its :attr:`key` is the measurement database's key; :meth:`graph` builds the
one-kernel graph that is exported and timed.
"""
from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from eqsat.ir.graph import Graph, Node, input_, node, weight
from eqsat.ir.ops import ACT_NAMES, Shape, get_op

AttrItems = tuple[tuple[str, Any], ...]


@dataclass(frozen=True)
class Step:
    """One op of a kernel: input 0 of every step after the first is the previous step's output;
    ``shapes`` and ``consts`` describe the step's other (leaf) inputs."""

    op: str
    attrs: AttrItems
    shapes: tuple[Shape, ...]
    consts: tuple[bool, ...]


COLD_WEIGHT_OPS = frozenset({"matmul"})  # ops whose weights are timed out of cache (Kernel.cold_weights)


@dataclass(frozen=True)
class Kernel:
    """One kernel of the runtime: one op, or a chain the runtime fuses (see :data:`RUNTIME_FUSIONS`)."""

    steps: tuple[Step, ...]
    dtype: str = "float32"
    warm: bool = False  # timed with its weights in cache even where :attr:`cold_weights` would evict them

    @property
    def key(self) -> str:
        """A canonical text, the same in every process (long attributes, e.g. an opaque node's
        serialized ONNX, are hashed)."""
        def attr(v: Any) -> Any:
            text = json.dumps(v, default=list)
            return v if len(text) <= 64 else "h:" + hashlib.blake2b(text.encode(), digest_size=12).hexdigest()

        parts = [[s.op, [[k, attr(v)] for k, v in s.attrs], [list(x) for x in s.shapes], list(s.consts)]
                 for s in self.steps]
        cold = ["cold-weights"] if self.cold_weights else []  # a timing of its own, never a warm one's
        stored = ["as-stored"] if self.stored_node else []  # timed as in its file, not re-exported
        return json.dumps([self.dtype, parts, *cold, *stored], separators=(",", ":"), default=list)

    @property
    def stored_node(self) -> bool:
        """An imported node the op table does not know (``opaque``): timed as it was in its file."""
        return len(self.steps) == 1 and self.steps[0].op == "opaque"

    def write_stored_model(self, path: str | Path) -> Path:
        """A :attr:`stored_node` kernel written to ``path`` as the ONNX model that is timed: the
        node at its own opset and domain with its real attributes, input types and constants
        (:func:`eqsat.onnx.runtime.write_node_model`). Other kernels are exported from :meth:`graph`."""
        from eqsat.onnx.runtime import write_node_model

        attrs = dict(self.steps[0].attrs)
        return write_node_model(attrs["node"], path, attrs["opset"], self.steps[0].consts)

    @property
    def cold_weights(self) -> bool:
        """Timed with its weights out of cache (:func:`.timer.evict_caches`): a product reading a
        weight (:data:`COLD_WEIGHT_OPS`). Timed alone, 40 runs read the same weights from cache;
        in an inference they were last read one inference ago, so warm timings priced
        weight-heavy products (QKV's, NasRNN's) far below their end-to-end share. Convolutions
        stay warm: timed cold, their prices moved further from the measured ones. The accuracy
        this gives is in docs/results/README.md (``experiment real``). A :attr:`warm` kernel is
        not: a model whose weights all fit in the cache reads them warm (``torch-cpu``)."""
        return not self.warm and any(s.op in COLD_WEIGHT_OPS and any(s.consts) for s in self.steps)

    @property
    def name(self) -> str:
        return "+".join(s.op for s in self.steps)

    def graph(self) -> Graph:
        """The kernel alone, as a graph: activations are graph inputs and weights are weights."""
        counter = iter(range(1 << 20))

        def leaf(shape: Shape, const: bool) -> Node:
            return (weight if const else input_)(f"{'w' if const else 'x'}{next(counter)}", shape)

        out: Node | None = None
        for s in self.steps:
            ins = [leaf(shape, c) for shape, c in zip(s.shapes, s.consts)]
            out = node(s.op, *([out] if out is not None else []), *ins, **dict(s.attrs))
        assert out is not None
        outs = tuple(node("proj", out, index=i) for i in range(len(out.shapes))) if len(out.shapes) > 1 else (out,)
        return Graph(outs, name=self.name)


def op_kernel(op: str, attrs: Mapping[str, Any], in_shapes: Sequence[Shape], consts: Sequence[bool]) -> Kernel:
    """The kernel of one op from its signature (what the e-graph extractor knows of an e-node)."""
    items = get_op(op).canonical_attrs(dict(attrs), tuple(in_shapes))
    return Kernel((Step(op, items, tuple(tuple(s) for s in in_shapes), tuple(consts)),))


def node_kernel(n: Node) -> Kernel:
    """The kernel of one node of a graph."""
    return op_kernel(n.op, n.attr_dict, [x.shapes[0] for x in n.inputs], [x.is_const for x in n.inputs])


@dataclass(frozen=True)
class Fusion:
    """A producer/consumer pair onnxruntime's CPU provider runs as one kernel at ``ENABLE_ALL``
    (``why`` names its graph transformer). The consumer's price is what it adds to the fused
    kernel: time(producer then consumer, exported together) less time(producer)."""

    producer: str
    consumers: frozenset[str]
    why: str
    const_others: bool = False  # the consumer's other inputs must be weights (folded into the producer)
    column_bias: bool = False  # the producer is 2-D and the consumer acts along its columns (axis 1)
    rules: tuple[str, ...] = ()  # the epilogue rules that perform this fusion on the IR (none: not expressible)

    @property
    def name(self) -> str:
        """The runtime's name for the fusion (its graph transformers)."""
        return self.why.split(":")[0]

    def producer_of(self, n: Node) -> int | None:
        """The index of ``n``'s input this fusion absorbs ``n`` into, or None."""
        if n.op not in self.consumers:
            return None
        for i, x in enumerate(n.inputs):
            if x.op != self.producer or x.is_const or x.attr("act") != "none":
                continue
            others = [y for j, y in enumerate(n.inputs) if j != i]
            if self.const_others and not all(y.is_const for y in others):
                continue
            if self.column_bias and (len(x.shape) != 2 or n.attr("axis") != 1):
                continue
            return i
        return None


RUNTIME_FUSIONS: tuple[Fusion, ...] = (
    Fusion("conv2d", frozenset(ACT_NAMES) - {"none"}, "ConvActivationFusion: Conv + activation is one FusedConv",
           rules=tuple(f"{form}-{act}" for form in ("conv", "bias") for act in ACT_NAMES if act != "none")),
    Fusion("conv2d", frozenset({"ewadd"}), "NCHWc transformer: a Conv's sum with another tensor is its Sum input"),
    Fusion("conv2d", frozenset({"chadd", "chmul", "affine"}), "ConvAddFusion, ConvMulFusion, ConvBNFusion",
           const_others=True, rules=("bn-fold", "bn-fold-bias", "scale-fold", "scale-fold-bias", "bias-fuse",
                                     "bias-add")),
    Fusion("matmul", frozenset({"chadd"}), "MatMulAddFusion: a 2-D product and its column bias are one Gemm",
           column_bias=True),
)
"""The fusions the measured model prices as the runtime runs them (a table: add a row per fusion)."""


def fused_kernel(n: Node, fusions: Sequence[Fusion] = RUNTIME_FUSIONS) -> tuple[Kernel, Node] | None:
    """The fused kernel (producer then ``n``) and the producer, if a row of ``fusions`` (default
    onnxruntime's, :data:`RUNTIME_FUSIONS`) absorbs ``n`` into one of its inputs."""
    for f in fusions:
        i = f.producer_of(n)
        if i is not None:
            producer = n.inputs[i]
            others = [y for j, y in enumerate(n.inputs) if j != i]
            consumer = Step(n.op, n.attrs, tuple(y.shapes[0] for y in others), tuple(y.is_const for y in others))
            return Kernel((node_kernel(producer).steps[0], consumer)), producer
    return None
