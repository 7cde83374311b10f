"""``eqsat-lab experiment zoo-runtime``: what onnxruntime already does to each model, beside what our
searches did to it.

For every model (the zoo's twelve, or ``--models DIR``) one cell opens the file in onnxruntime's CPU
provider with ``ORT_ENABLE_ALL`` and counts the ops of the graph it runs against the file's
(:mod:`eqsat.onnx.runtime_graph`): which ops it fused away and which fused or layout ops it runs
instead. With ``--zoo-results`` (a ``zoo.json`` of ``eqsat-lab experiment zoo``) each row also lists
the zoo's cells of that model: the search's predicted gain, the measured onnxruntime ratio of the
written file, and why an input was kept. Nothing is timed here.
"""
from __future__ import annotations

import argparse
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from eqsat.guards import Kept
from experiments.command import Experiment, add_sweep_options, add_zoo_input, split_list, sweep_kwargs
from experiments.output import write_report
from experiments.sweep import Cell, RunOptions, run_cells


def runtime_cell(path: str, digest: str) -> dict[str, Any]:
    """One model's op counts as written and as onnxruntime runs it (``digest``: part of the cell key)."""
    from eqsat.onnx.runtime_graph import runtime_graph

    return runtime_graph(path).to_dict()


def zoo_cells(results: Sequence[Mapping[str, Any]], model: str) -> str:
    """The zoo's cells of ``model`` in one line: ``search device: predicted -> measured``, and the
    reason when the input was kept."""
    parts = []
    for r in results:
        if r.get("model") != model:
            continue
        if r.get("status") != "ok":
            parts.append(f"{r['search']} {r['device']}: {r.get('status')}")
            continue
        why = r.get("kept")
        kept = f" (kept: {Kept.from_dict(why).brief})" if why else (" (kept)" if not r.get("changed") else "")
        parts.append(f"{r['search']} {r['device']}: {r.get('predicted_gain', 1.0):.3f} -> "
                     f"{r.get('measured_ratio', 1.0):.3f}{kept}")
    return "; ".join(parts) or "-"


def _changes(changes: Mapping[str, int], sign: str) -> str:
    from eqsat.onnx.runtime_graph import describe_changes

    return describe_changes(changes, sign)


def format_table(rows: Sequence[Mapping[str, Any]], with_zoo: bool) -> str:
    """One Markdown row per model: ops in the file and in onnxruntime's graph, what it removed and
    added, and (``with_zoo``) the zoo's cells."""
    head = "| model | file ops | onnxruntime ops | onnxruntime fused away | onnxruntime runs instead |"
    head += " our searches: predicted -> measured |" if with_zoo else ""
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for r in rows:
        line = (f"| {r['model']} | {sum(r['file_ops'].values())} | {sum(r['runtime_ops'].values())} | "
                f"{_changes(r['removed'], '-')} | {_changes(r['added'], '+')} |")
        lines.append(line + (f" {r['zoo_cells']} |" if with_zoo else ""))
    return "\n".join(lines)


def read_results(path: str | None) -> list[dict[str, Any]]:
    """The rows of a zoo.json, or none; a missing or malformed file is one error naming it."""
    if not path:
        return []
    try:
        rows = json.loads(Path(path).read_text())["rows"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ValueError(f"--zoo-results {path}: not a zoo.json of 'eqsat-lab experiment zoo' ({exc})") from None
    if not isinstance(rows, list) or not all(isinstance(r, dict) and "model" in r for r in rows):
        raise ValueError(f"--zoo-results {path}: its rows are not the zoo's rows")
    return rows


def run(models: str | None, out: Path, *, zoo: Sequence[str] = (), zoo_results: str | None = None, seed: int = 0,
        options: RunOptions = RunOptions(), command: str = "") -> list[dict[str, Any]]:
    from experiments.runs.zoo import digest, model_files

    if models and zoo:
        raise ValueError("--models and --zoo exclude each other: --zoo picks models of the generated zoo")
    results = read_results(zoo_results)
    files = model_files(models, out, seed, False, zoo)
    found = run_cells([Cell.of("zoo-runtime", "experiments.runs.zoo_runtime:runtime_cell", path=str(f),
                               digest=digest(f)) for f in files], out, options=options,
                      desc="zoo-runtime: onnxruntime's graphs")
    rows = [{"model": f.stem, **cell, "zoo_cells": zoo_cells(results, f.stem)} for f, cell in zip(files, found)]
    table = format_table(rows, bool(results))
    note = ("(file ops: nodes in the file; onnxruntime ops: nodes of the graph onnxruntime runs, CPU provider, "
            "ORT_ENABLE_ALL; ms. and nchwc. are its com.microsoft and NCHWc domains; +Relu etc.: the activation "
            "fused into a conv, +Add: a residual sum fused into it"
            + ("; our searches: predicted gain -> measured in/out ratio of the zoo's cells" if results else "")
            + ")")
    write_report(out, "zoo_runtime", rows, {"command": command, "zoo_results": zoo_results or ""}, table, note,
                 command)
    print(f"wrote {out / 'zoo_runtime.csv'}, {out / 'zoo_runtime.json'} and {out / 'zoo_runtime.md'}")
    return rows


def _add_arguments(p: argparse.ArgumentParser) -> None:
    add_zoo_input(p)
    p.add_argument("--zoo-results", help="a zoo.json of 'eqsat-lab experiment zoo': its cells join each model's row")
    add_sweep_options(p, "results/zoo", device=False)


def _run(args: argparse.Namespace) -> int:
    run(args.models, Path(args.out), zoo=split_list(args.zoo), zoo_results=args.zoo_results, seed=args.seed,
        **sweep_kwargs(args))
    return 0


EXPERIMENTS = (
    Experiment("zoo-runtime", "what onnxruntime (ORT_ENABLE_ALL) already does to each model: the ops of the graph it "
               "runs against the file's, beside the zoo's cells of that model",
               _add_arguments, _run, outputs=("zoo_runtime.csv", "zoo_runtime.json", "zoo_runtime.md",
                                              "models/full/<model>.onnx"), input_args=("models", "zoo_results"),
               doc="zoo/README.md#what-onnxruntime-already-does-per-model-and-what-our-searches-tried"),
)
