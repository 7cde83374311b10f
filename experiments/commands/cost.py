"""``eqsat-lab cost``: what a graph costs on a device, per op."""
from __future__ import annotations

import argparse

from experiments.command import Command, add_device, add_onnx_input, load_model
from experiments.output import write_json


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("model", help="benchmark name (see `eqsat-lab models`) or an .onnx file")
    add_onnx_input(p)
    add_device(p)
    p.add_argument("--param", action="append", default=[], metavar="K=V", help="builder size parameter")
    p.add_argument("--json", dest="json_out", help="write the report as JSON here")
    p.add_argument("--all-ops", action="store_true", help="also list folded and free ops")


def run(args: argparse.Namespace) -> int:
    from eqsat.cost.registry import cost_model

    graph, _ = load_model(args)
    model = cost_model(args.device)
    report = model.report(graph)
    print(f"{graph.name} on {report.device} ({report.dtype}): {report.total_us:.2f} µs, {graph.op_count()} ops")
    print(f"{'op':10s} {'output shape':>22s} {'GFLOP':>9s} {'MB':>9s} {'µs':>8s}  bound")
    for r in report.rows:
        if r.kind in ("leaf", "view") or (r.kind == "folded" and not args.all_ops):
            continue
        print(f"{r.op:10s} {str(r.shape):>22s} {r.flops / 1e9:9.3f} {r.bytes / 1e6:9.3f} {r.time_us:8.2f}  {r.kind}")
    latency = model.latency_us(graph)
    if latency is not None:
        print(f"predicted end-to-end latency {latency:.2f} µs (kernels plus one run call)")
    print(f"prices: {model.provenance()}")
    if args.json_out:
        write_json(args.json_out, report.to_dict())
    return 0


COMMAND = Command("cost", "cost of one benchmark graph or ONNX model on a device (roofline or measured), per op",
                  add_arguments, run, output_args=("json_out",), input_args=("model",))
