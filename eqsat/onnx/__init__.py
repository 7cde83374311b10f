"""ONNX models in and out of the IR (the ``onnx`` extra; ``onnxruntime`` checks the results).

:func:`load` reads a model (opset 13 or newer; an older one, and IR version 3, converted in
memory) into a :class:`Graph` plus the initializer data (a large initializer as a read-only view of
the file mapped, :mod:`eqsat.onnx.mapped`):
inputs become ``input`` leaves (a dynamic batch dimension takes ``batch``), float initializers
become ``weight`` leaves, and nodes are mapped through :data:`IMPORTERS`, one entry per ONNX op.
Node order in the file does not matter (nodes are sorted by their data dependences). A Conv bias
is conv2d's optional third input; an Add or Mul of a per-channel vector (ONNX broadcasting, e.g.
``(1, C, 1, 1)``) is ``chadd``/``chmul``; inference BatchNormalization is one ``affine`` node
(scale and shift computed from its four statistics). Folding these into convolutions is done by
the rules in ``rules/epilogue.rules``, not here. An op without an importer, or a node its importer
declines (training-mode BatchNormalization, Gather of run-time indices, ...), becomes ``opaque``
nodes, one per output: the ONNX node itself, shapes from ONNX shape inference (a dimension it
leaves unknown, from one onnxruntime run of the model on the check's random inputs), kept
exactly and evaluated by onnxruntime; no rule matches it, so the optimizer works around it,
and the reason is listed. :func:`save` writes a graph back at the model's opset,
folding weight-only subgraphs into initializers computed from the imported data; the file is
written whole or not at all and passes ``onnx.checker``. :func:`export_graph` writes a graph
built in Python with given or random weights. :func:`max_difference` runs two models in
onnxruntime on the same random inputs.

The modules, in the order a model flows:

- ``common`` — the opset range, :class:`OnnxError`, :class:`Decline`, the lazy import, :class:`Imported`
- ``mapped`` — the file read with its large weights mapped, not copied: the model parsed without them
- ``reader`` — :func:`load`: each node through its importer, or kept opaque with its reason
- ``importers`` — the :data:`IMPORTERS` table, one importer per ONNX op type, from the modules below
- ``importers_base`` — what every importer shares: its state, attribute reading, broadcasting helpers
- ``importers_math`` — products and elementwise math: MatMul, Gemm, Add/Mul, Div, Softmax, LayerNorm, Gelu
- ``importers_nn`` — the convolutional family: Conv, pools, BatchNormalization, Clip
- ``importers_shape`` — layout ops: Flatten, Pad, Reshape, Split, Squeeze/Unsqueeze, Gather, Expand
- ``writer`` — :func:`save` and :func:`export_graph` through :data:`EXPORTERS`, one writer per IR op
- ``writer_ops`` — the writers of the rows added for PyTorch's dynamo exporter (powers, where, slice, ...)
- ``writer_patterns`` — what the writer writes back as the exporter wrote it: Gemm pairs, split parts read, N-D MatMuls
- ``written`` — an optimized model written: checked in onnxruntime first, never over the input, priced again
- ``runtime`` — onnxruntime: one opaque node run, random feeds, the comparison of two models
- ``runtime_baseline`` — what onnxruntime would have done anyway: its own fusions on the input, priced
- ``runtime_graph`` — the op counts of the graph onnxruntime runs against the file's
"""
from eqsat.onnx.common import MIN_OPSET, OPSET, Imported, OnnxError
from eqsat.onnx.reader import IMPORTERS, load
from eqsat.onnx.runtime import max_difference, random_feeds, run_node
from eqsat.onnx.writer import EXPORTERS, export_graph, interface_dtype, random_weights, save

__all__ = ["EXPORTERS", "IMPORTERS", "MIN_OPSET", "OPSET", "Imported", "OnnxError", "export_graph", "load",
           "interface_dtype", "max_difference", "random_feeds", "random_weights", "run_node", "save"]
