"""Shared pieces of ONNX in and out: the opset range, the error type, the lazy import and
:class:`Imported` (a model read into the IR)."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..errors import EqsatError
from ..graph import Graph

OPSET = 17  # written by export_graph; an imported model is written back at its own opset
MIN_OPSET = 13  # the importers follow opset 13+ (Split and Reshape take their sizes as inputs)


class OnnxError(EqsatError):
    """A model this tool cannot read or write, with the file and node named."""


class Decline(Exception):
    """An importer cannot express this node's attributes or operands; it becomes opaque (the
    reason is listed with the opaque ops)."""


def _onnx() -> Any:
    try:
        import onnx
    except ImportError as exc:  # pragma: no cover - depends on the optional extra
        raise OnnxError("ONNX support needs the optional extra: pip install 'eqsat-lab[onnx]'") from exc
    return onnx


@dataclass
class Imported:
    """A model read into the IR: the graph, initializer data, and the names to write it back with."""

    graph: Graph
    weights: dict[str, np.ndarray]
    input_names: list[str]
    output_names: list[str]
    ops: dict[str, int] = field(default_factory=dict)
    opaque: list[str] = field(default_factory=list)  # "op_type (node name: reason)" of every opaque node
    opset: int = OPSET
    elem_types: dict[str, int] = field(default_factory=dict)  # ONNX element type of each graph input and output



def _first_line(exc: Exception) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
