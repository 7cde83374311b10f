"""What onnxruntime makes of a model file: the op counts of the graph it runs against the file's.

A search's gain on a runtime is what it adds beyond the runtime's own graph rewrites (fusions,
layout changes). onnxruntime writes the graph it will run when a session is given
``optimized_model_filepath``; counting its ops next to the file's shows which fusions it applied:
a ``FusedConv`` or an NCHWc ``Conv`` with its activation folded in, ``ReorderInput``/``ReorderOutput``
around NCHWc regions, ``FusedMatMul``, ``Gelu``/``LayerNormalization``/``Attention`` fusions, and so on.
"""
from __future__ import annotations

import tempfile
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from eqsat.onnx.common import OnnxError, _first_line, _onnx

DOMAINS = {"": "", "ai.onnx": "", "com.microsoft": "ms.", "com.microsoft.nchwc": "nchwc."}
"""Operator domain -> the prefix of its ops' labels (another domain is written out in full)."""
FUSED_INPUT = {"Conv": 4, "FusedConv": 4}  # an input at this position is a fused residual sum (Add)


def op_label(node: Any) -> str:
    """A node's op type, prefixed by a short name of its domain; a conv also names what onnxruntime
    fused into it (``nchwc.Conv+Relu``, ``ms.FusedConv+HardSigmoid``, ``+Add`` for a fused sum)."""
    prefix = DOMAINS.get(node.domain, f"{node.domain}.")
    label = prefix + node.op_type
    acts = [a.s.decode() for a in node.attribute if a.name == "activation"]
    if node.op_type in FUSED_INPUT and len([i for i in node.input if i]) >= FUSED_INPUT[node.op_type]:
        label += "+Add"
    return label + "".join(f"+{a}" for a in acts)


def op_counts(graph: Any) -> dict[str, int]:
    """:func:`op_label` counts of a graph's nodes (not its subgraphs)."""
    return dict(Counter(op_label(n) for n in graph.node))


@dataclass(frozen=True)
class RuntimeGraph:
    """A model's op counts as written (``file_ops``) and as onnxruntime runs it (``runtime_ops``)."""

    file_ops: Mapping[str, int]
    runtime_ops: Mapping[str, int]
    level: str

    @property
    def removed(self) -> dict[str, int]:
        """Op labels of the file that onnxruntime runs fewer of (fused away or rewritten), how many fewer."""
        return {k: v - self.runtime_ops.get(k, 0) for k, v in sorted(self.file_ops.items())
                if self.runtime_ops.get(k, 0) < v}

    @property
    def added(self) -> dict[str, int]:
        """Op labels onnxruntime runs more of than the file holds (its fused and layout ops), how many more."""
        return {k: v - self.file_ops.get(k, 0) for k, v in sorted(self.runtime_ops.items())
                if v > self.file_ops.get(k, 0)}

    def to_dict(self) -> dict[str, Any]:
        return {"level": self.level, "file_ops": dict(self.file_ops), "runtime_ops": dict(self.runtime_ops),
                "removed": self.removed, "added": self.added}


def runtime_graph(path: str | Path, level: str = "ENABLE_ALL", threads: int = 1) -> RuntimeGraph:
    """Open ``path`` in onnxruntime's CPU provider at graph optimization ``level`` (a
    ``GraphOptimizationLevel`` name less ``ORT_``) and count the ops of the graph it writes out.
    The weights go to a side file that is never read: only the graph is counted."""
    onnx = _onnx()
    import onnxruntime as ort

    path = Path(path)
    try:
        file_graph = onnx.load(str(path), load_external_data=False).graph
    except Exception as exc:  # protobuf's decode errors have no common base with onnx's
        raise OnnxError(f"{path}: not an ONNX model: {_first_line(exc)}") from None
    with tempfile.TemporaryDirectory(prefix="eqsat-runtime-graph-") as tmp:
        so = ort.SessionOptions()
        so.graph_optimization_level = getattr(ort.GraphOptimizationLevel, f"ORT_{level}")
        so.intra_op_num_threads = threads
        so.log_severity_level = 3  # the warning that an NCHWc graph is machine-specific is expected here
        so.optimized_model_filepath = str(Path(tmp) / "optimized.onnx")
        so.add_session_config_entry("session.optimized_model_external_initializers_file_name", "weights.bin")
        try:
            ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])
        except Exception as exc:  # onnxruntime's errors have no common base class
            raise OnnxError(f"{path}: onnxruntime cannot open the model: {_first_line(exc)}") from None
        runtime = onnx.load(so.optimized_model_filepath, load_external_data=False).graph
    return RuntimeGraph(op_counts(file_graph), op_counts(runtime), level)


def describe_changes(changes: Mapping[str, int], sign: str) -> str:
    """``{"Relu": 14}`` as ``"Relu -14"`` (``sign`` ``-``) or ``"+14"``; ``-`` when empty."""
    return ", ".join(f"{k} {sign}{v}" for k, v in changes.items()) or "-"
