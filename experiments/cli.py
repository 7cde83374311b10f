"""The ``eqsat-lab`` command line.

Subcommands are a table (``COMMANDS``): each entry adds its arguments and names
the function that runs it, so later issues add a row, not a branch.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any, Callable, Sequence

from eqsat.errors import EqsatError


def parse_params(items: Sequence[str]) -> dict[str, Any]:
    """``k=v`` pairs into builder keyword arguments (ints, comma-separated int tuples or strings)."""
    params: dict[str, Any] = {}
    for item in items:
        if "=" not in item:
            raise ValueError(f"--param expects key=value, got {item!r}")
        key, value = item.split("=", 1)
        try:
            params[key] = tuple(int(v) for v in value.split(",")) if "," in value else int(value)
        except ValueError:
            params[key] = value
    return params


def _write_json(path: str, payload: Any) -> None:
    """Write JSON atomically: a temp file renamed into place."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(target.name + ".tmp")
    tmp.write_text(json.dumps(payload, indent=2) + "\n")
    tmp.replace(target)


# --------------------------------------------------------------------------- cost
def _add_cost(p: argparse.ArgumentParser) -> None:
    p.add_argument("model", help="benchmark name (see `eqsat-lab models`)")
    p.add_argument("--device", default="h100", help="device profile name or a .json profile (default h100)")
    p.add_argument("--param", action="append", default=[], metavar="K=V", help="builder size parameter")
    p.add_argument("--json", dest="json_out", help="write the report as JSON here")
    p.add_argument("--all-ops", action="store_true", help="also list folded and free ops")


def _run_cost(args: argparse.Namespace) -> int:
    from eqsat.cost import RooflineCost
    from eqsat.models import build

    graph = build(args.model, **parse_params(args.param))
    report = RooflineCost(args.device).report(graph)
    print(f"{graph.name} on {report.device} ({graph.dtype}): {report.total_us:.2f} µs, {graph.op_count()} ops")
    print(f"{'op':10s} {'output shape':>22s} {'GFLOP':>9s} {'MB':>9s} {'µs':>8s}  bound")
    for r in report.rows:
        if r.kind in ("leaf", "view") or (r.kind == "folded" and not args.all_ops):
            continue
        print(f"{r.op:10s} {str(r.shape):>22s} {r.flops / 1e9:9.3f} {r.bytes / 1e6:9.3f} {r.time_us:8.2f}  {r.kind}")
    if args.json_out:
        _write_json(args.json_out, report.to_dict())
    return 0


# --------------------------------------------------------------------------- models / table / dot
def _add_models(p: argparse.ArgumentParser) -> None:
    pass


def _run_models(args: argparse.Namespace) -> int:
    from eqsat.models import MODELS, build, model_params

    for name in MODELS:
        g = build(name)
        params = ", ".join(f"{k}={v}" for k, v in model_params(name).items())
        print(f"{name:14s} {g.op_count():5d} ops  ({params})")
    return 0


def _add_table(p: argparse.ArgumentParser) -> None:
    p.add_argument("--devices", default="h100,weak", help="comma-separated device names")
    p.add_argument("--models", default="", help="comma-separated model names (default: all)")
    p.add_argument("--out", help="folder for cost_table.csv / .json")


def _run_table(args: argparse.Namespace) -> int:
    from experiments.cost_table import run

    models = [m for m in args.models.split(",") if m] or None
    run(models, [d for d in args.devices.split(",") if d], Path(args.out) if args.out else None,
        progress=sys.stderr.isatty())
    return 0


def _add_dot(p: argparse.ArgumentParser) -> None:
    p.add_argument("model")
    p.add_argument("--param", action="append", default=[], metavar="K=V")
    p.add_argument("--out", help="write the DOT text here instead of stdout")


def _run_dot(args: argparse.Namespace) -> int:
    from eqsat.models import build

    text = build(args.model, **parse_params(args.param)).to_dot()
    if args.out:
        Path(args.out).write_text(text + "\n")
    else:
        print(text)
    return 0


# --------------------------------------------------------------------------- rules
def _add_rules(p: argparse.ArgumentParser) -> None:
    sub = p.add_subparsers(dest="rules_cmd", required=True)
    check = sub.add_parser("check", help="parse rule files and summarize them")
    check.add_argument("files", nargs="+")
    fmt = sub.add_parser("fmt", help="print rule files in canonical form")
    fmt.add_argument("files", nargs="+")


def _run_rules(args: argparse.Namespace) -> int:
    from eqsat.rules import format_rule, load_rules

    for path in args.files:
        rules = load_rules(path)
        if args.rules_cmd == "fmt":
            for r in rules:
                print(format_rule(r))
            continue
        multi = sum(r.is_multi for r in rules)
        origins: dict[str, int] = {}
        for r in rules:
            origins[r.origin] = origins.get(r.origin, 0) + 1
        print(f"{path}: {len(rules)} rules ({len(rules) - multi} single-output, {multi} multi-output; "
              + ", ".join(f"{v} {k}" for k, v in sorted(origins.items())) + ")")
    return 0


Command = tuple[str, Callable[[argparse.ArgumentParser], None], Callable[[argparse.Namespace], int]]
COMMANDS: list[Command] = [
    ("table", _add_table, _run_table),
    ("cost", _add_cost, _run_cost),
    ("models", _add_models, _run_models),
    ("dot", _add_dot, _run_dot),
    ("rules", _add_rules, _run_rules),
]
HELP = {
    "table": "cost table of the built-in benchmark graphs (the main job for now)",
    "cost": "roofline cost of one benchmark graph, per op",
    "models": "list the benchmark graphs and their size parameters",
    "dot": "Graphviz DOT of a benchmark graph",
    "rules": "read, check and format rule files",
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="eqsat-lab", description="Tensor-graph superoptimization and auto-tuning lab.")
    sub = parser.add_subparsers(dest="command", required=True)
    for name, add, run in COMMANDS:
        p = sub.add_parser(name, help=HELP[name])
        add(p)
        p.set_defaults(_run=run)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args._run(args)
    except (EqsatError, KeyError, ValueError, FileNotFoundError) as exc:
        message = exc.args[0] if isinstance(exc, KeyError) and exc.args else exc
        print(f"eqsat-lab: error: {message}", file=sys.stderr)
        return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
