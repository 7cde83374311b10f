"""The cost table of the built-in benchmark graphs on one or more devices."""
from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from tqdm import tqdm

from eqsat.cost.devices import REFERENCE_DEVICES
from eqsat.cost.registry import cost_model
from eqsat.files import write_atomic
from eqsat.models import MODELS, build


@dataclass(frozen=True)
class CostRow:
    model: str
    device: str
    ops: int
    weights: int
    parameters: int
    kernels: int
    folded: int
    total_us: float
    compute_bound: int
    memory_bound: int


def cost_rows(models: Iterable[str], devices: Sequence[str], progress: bool = True) -> list[CostRow]:
    """Price every model at its default size on every device."""
    rows: list[CostRow] = []
    models = list(models)
    for name in tqdm(models, desc="cost table", disable=not progress, leave=False):
        graph = build(name)
        summary = graph.summary()
        for dev in devices:
            report = cost_model(dev).report(graph)
            kinds = [r.kind for r in report.rows]
            rows.append(CostRow(
                model=name, device=dev, ops=summary["ops"], weights=summary["weights"],
                parameters=summary["parameters"], kernels=kinds.count("compute") + kinds.count("memory"),
                folded=kinds.count("folded"), total_us=round(report.total_us, 3),
                compute_bound=kinds.count("compute"), memory_bound=kinds.count("memory"),
            ))
    return rows


def format_table(rows: Sequence[CostRow]) -> str:
    devices = list(dict.fromkeys(r.device for r in rows))
    by = {(r.model, r.device): r for r in rows}
    models = list(dict.fromkeys(r.model for r in rows))
    head = f"{'model':14s} {'ops':>5s} {'params':>11s} " + " ".join(f"{d + ' µs':>12s}" for d in devices)
    lines = [head, "-" * len(head)]
    for m in models:
        first = by[(m, devices[0])]
        lines.append(f"{m:14s} {first.ops:5d} {first.parameters:11,d} "
                     + " ".join(f"{by[(m, d)].total_us:12.1f}" for d in devices))
    return "\n".join(lines)


def write_outputs(rows: Sequence[CostRow], out: Path) -> None:
    """Write ``cost_table.csv`` and ``cost_table.json`` into ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=list(asdict(rows[0])))
    writer.writeheader()
    writer.writerows(asdict(r) for r in rows)
    write_atomic(out / "cost_table.csv", buf.getvalue())  # whole or not at all, like every table
    write_atomic(out / "cost_table.json", json.dumps([asdict(r) for r in rows], indent=2) + "\n")


def run(models: Iterable[str] | None = None, devices: Sequence[str] = REFERENCE_DEVICES,
        out: Path | None = None, progress: bool = True) -> list[CostRow]:
    rows = cost_rows(models or MODELS, devices, progress)
    print(format_table(rows))
    if out is not None:
        write_outputs(rows, out)
        print(f"wrote {out / 'cost_table.csv'} and {out / 'cost_table.json'}")
    return rows
