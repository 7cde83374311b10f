"""The ``torch.compile`` backend ``eqsat``: ``torch.compile(model, backend="eqsat",
options={"search": "eqsat", "device": "h100"})``.

PyTorch finds it by the ``torch_dynamo_backends`` entry point in pyproject.toml (an installed
package); importing this module also registers it by name when no installed entry point did.
Each graph dynamo captures is exported, imported with its real weights (placeholders dynamo made
of the module's parameters and buffers are weights, read once, at compile time; the others are
inputs), optimized and checked against the captured graph on the example inputs
(:func:`eqsat.pytorch.capture.compile_graph`); where PyTorch's ONNX exporter cannot write an op,
the graph is split around it (:func:`eqsat.pytorch.partition.compile_around`). It optimizes
inference: a call that needs gradients, a graph with symbolic shapes, an op, dtype or model the
route cannot take, or a result that differs falls back to the captured graph, with one warning
line saying why; the user's module is never changed.
"""
from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import torch

from eqsat.pytorch.capture import compile_graph
from eqsat.pytorch.importer import ExportError, one_line
from eqsat.pytorch.optimize import Options
from eqsat.pytorch.partition import compile_around

NAME = "eqsat"
LOG = logging.getLogger("eqsat.pytorch")


MAX_KEPT_OPS = 8  # ops the exporter cannot write that a graph may keep in PyTorch before it falls back


def compile_any(gm: torch.fx.GraphModule, example_inputs: Sequence[Any], options: Options) -> Callable[..., Any]:
    """:func:`compile_graph`, or, where PyTorch's ONNX exporter has no function for an op, the graph
    split around every such op (:func:`eqsat.pytorch.partition.compile_around`): those ops run in
    PyTorch itself, the rest is optimized."""
    kept: list[str] = []
    while True:
        try:
            if not kept:
                return compile_graph(gm, example_inputs, options)
            return compile_around(gm, example_inputs, options, tuple(kept))
        except ExportError as exc:
            if not exc.op or exc.op in kept or len(kept) >= MAX_KEPT_OPS:
                raise
            kept.append(exc.op)


def eqsat_backend(gm: torch.fx.GraphModule, example_inputs: Sequence[Any],
                  options: Mapping[str, Any] | None = None, **_: Any) -> Callable[..., Any]:
    """The ``torch.compile`` backend (``torch.compile(model, backend="eqsat", options=...)``; see
    :class:`~eqsat.pytorch.optimize.Options`): the captured graph optimized, or on any failure the
    captured graph itself, with one warning line saying why."""
    try:
        run = compile_any(gm, example_inputs, Options.parse(options))
    except Exception as exc:  # any failure: the user's program still runs, unchanged
        LOG.warning("eqsat backend: %s; running the captured graph unoptimized", one_line(exc).rstrip("."))
        return gm.forward
    LOG.info("eqsat backend: %s", run.summary)
    return run


def register() -> None:
    """Register :func:`eqsat_backend` as ``eqsat`` unless an installed entry point already names it."""
    from torch._dynamo.backends.registry import _BACKENDS, list_backends, register_backend

    list_backends()  # discovers the installed entry points first
    if NAME not in _BACKENDS:
        register_backend(eqsat_backend, name=NAME)


register()
