"""A PyTorch module optimized: :func:`optimize_module` (the ``torch.export`` route) and the
search step the ``torch.compile`` backend shares with it (:func:`optimize_import`).

The module is exported, imported with its real weights (:mod:`eqsat.pytorch.importer`),
optimized by the project's one optimize job (:func:`eqsat.pipeline.optimize_model`: price,
calibrate, search, verify, guards), built back as a module, and checked against the program on
the example inputs before it is returned. :class:`Options` are what a caller chooses: the search,
the device it prices on, its preset, the check's seed and the dtype the module computes in.
"""
from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, fields
from typing import Any

import torch

from eqsat.errors import EqsatError, UnsupportedError
from eqsat.ir.graph import Graph
from eqsat.pytorch.importer import TorchImport, check_same, from_exported, one_line, to_torch
from eqsat.searches import EGRAPH


@dataclass(frozen=True)
class Options:
    """``search``: a registered search (``eqsat``, ``taso``, ...); ``device``: the device it prices
    on (``h100``, ``ort-cpu``, ...; default: the optimize job's default for a graph in memory);
    ``preset``: the search's limits preset (default: its own); ``seed``: the numerical check's
    inputs; ``dtype``: what the module computes in (default: the model's float type)."""

    search: str = EGRAPH
    device: str | None = None
    preset: str | None = None
    seed: int = 0
    dtype: str | None = None

    @classmethod
    def parse(cls, options: Mapping[str, Any] | None) -> Options:
        """``options`` as given to ``torch.compile(..., options=)`` or :func:`optimize_module`;
        an unknown key is one sentence naming the known ones."""
        known = {f.name for f in fields(cls)}
        given = dict(options or {})
        unknown = sorted(set(given) - known)
        if unknown:
            raise UnsupportedError(f"unknown option {unknown[0]!r} (eqsat takes: {', '.join(sorted(known))})")
        return cls(**given)


@dataclass(frozen=True)
class Optimized:
    """What optimizing one program did: the input graph, the graph chosen, the optimize job's
    one-line summary (costs, search, stop reason), ``kept``: which guard kept the input and on
    what numbers (:class:`eqsat.guards.Kept`; None when the search's graph was taken) and
    ``layout``: the memory layout measured fastest for it on the pricing device
    (:class:`eqsat.cost.costmodel.Layout`; None on a device that runs nothing)."""

    graph: Graph
    best: Graph
    summary: str
    kept: Any = None
    layout: Any = None

    @property
    def layout_name(self) -> str:
        """The layout the module is built in: the one chosen, else PyTorch's default."""
        return self.layout.name if self.layout is not None else "contiguous"


@contextlib.contextmanager
def _main_not_rerun() -> Iterator[None]:
    """A search's worker process started while this runs does not re-run the user's script.

    Once torch has started threads, the e-graph's worker is spawned, and a spawned child runs the
    parent's ``__main__`` file again: a script calling ``torch.compile`` at its top level (no
    ``if __name__ == "__main__"`` guard) would compile again inside the worker and fail there. The
    worker needs nothing from ``__main__`` (its target and messages are eqsat's), so the main module's
    ``__file__`` and ``__spec__``, which tell multiprocessing what to re-run, are hidden meanwhile."""
    main = sys.modules.get("__main__")
    saved = {k: main.__dict__.pop(k) for k in ("__file__", "__spec__") if main is not None and k in main.__dict__}
    if main is not None:
        main.__spec__ = None  # multiprocessing reads the attribute
    try:
        yield
    finally:
        if main is not None:
            main.__dict__.update(saved)


def optimize_graph(graph: Graph, options: Options) -> Optimized:
    """``graph`` through the optimize job with ``options``; its user errors become one sentence."""
    from eqsat.pipeline import optimize_model

    try:
        with _main_not_rerun():
            outcome = optimize_model(graph, search=options.search, device=options.device, preset=options.preset,
                                     seed=options.seed)
    except (EqsatError, ValueError) as exc:
        raise UnsupportedError(f"the {options.search} search cannot optimize this graph: {one_line(exc)}") from None
    summary = outcome.result.summary()
    if outcome.layout is not None:
        summary += f"; {outcome.layout.summary()}"
    return Optimized(graph, outcome.best, summary, outcome.kept, outcome.layout)


def optimize_import(source: TorchImport, options: Options, *, as_tuple: bool = False,
                    device: str | torch.device | None = None) -> tuple[torch.nn.Module, Optimized]:
    """The optimized graph of an imported program as a module (with the program's weights)."""
    done = optimize_graph(source.graph, options)
    return to_torch(done.best, source, device=device, dtype=options.dtype, as_tuple=as_tuple,
                    layout=done.layout_name), done


def optimize_module(module: torch.nn.Module, example_inputs: Sequence[Any], *,
                    kwargs: Mapping[str, Any] | None = None, **options: Any) -> torch.nn.Module:
    """``module`` optimized for calls like ``module(*example_inputs, **kwargs)``: exported with
    ``torch.export``, searched (``options``: :class:`Options`), rebuilt as a module holding the
    weights' current values (a later change to the module's parameters does not reach it) and
    checked against the exported program on the example inputs; its ``summary`` and ``kept``
    say what the optimize job did (:class:`Optimized`). An unsupported model, op or
    dtype, or a result that differs, is an :class:`~eqsat.errors.UnsupportedError` of one
    sentence; ``module`` itself is never changed."""
    from eqsat.pytorch.importer import export

    opts = Options.parse(options)
    ep = export(module, example_inputs, kwargs)
    source = from_exported(ep, type(module).__name__)
    optimized, done = optimize_import(source, opts)
    args = tuple(example_inputs) if isinstance(example_inputs, (tuple, list)) else (example_inputs,)
    with torch.no_grad():
        expected = ep.module()(*args, **dict(kwargs or {}))
        got = optimized(*args, **dict(kwargs or {}))
    differs = check_same(expected, got)
    if differs:
        raise UnsupportedError(f"the optimized {type(module).__name__} does not reproduce it on the example "
                               f"inputs ({differs})")
    optimized.summary, optimized.kept = done.summary, done.kept
    return optimized
