"""``eqsat-lab pet demo|verify``: the reference PET example and the small-prime error bound."""
from __future__ import annotations

import argparse
from dataclasses import asdict

import numpy as np

from eqsat.ir.evaluate import evaluate
from experiments.output import write_json
from pet.programs import ConvProblem, SpatialSplit
from pet.verify import (
    apply_corrections,
    correction_kernels,
    false_pass_rates,
    overhead,
    verify,
)


def _problem(args: argparse.Namespace) -> ConvProblem:
    return ConvProblem(args.N, args.C, args.O, args.H, args.W, stride=args.stride, pad=args.pad,
                       dilation=args.dilation)


def run_demo(args: argparse.Namespace) -> int:
    p = _problem(args)
    t = SpatialSplit(args.axis, args.parts)
    if not t.applies(p):
        raise ValueError(f"{t.name} does not preserve the output shape of {p}")
    v = verify(p, t, tests=args.tests, prime=args.prime, seed=args.seed)
    kernels = correction_kernels(v)
    rng = np.random.default_rng(args.seed)
    vals = {leaf.attr("name"): rng.standard_normal(leaf.shape) for leaf in p.leaves()}
    a = evaluate(p.original(), vals)[0]
    b = evaluate(t.program(p), vals)[0]
    fixed = apply_corrections(p, b, vals, kernels)
    print(f"{p}\n{t.name}: boxes along {args.axis}: original {v.axis_boxes[args.axis]['original']}, "
          f"transformed {v.axis_boxes[args.axis]['transformed']}")
    print(f"{len(v.regions)} regions, {v.positions_checked} of {v.positions_total} positions checked "
          f"(Theorem 1), {v.tests} tests in GF({v.prime}) each (Theorem 2: miss probability <= {v.bound:.2g})")
    print(f"{'N':>7s} {'O':>7s} {'H':>7s} {'W':>7s}  equivalent")
    bad = {r.box for r in v.non_equivalent}
    for r in v.regions:
        print(" ".join(f"{lo:>3d}-{hi:<3d}" for lo, hi in r.box) + f"  {'no' if r.box in bad else 'yes'}")
    for k in kernels:
        print(f"correction: output H {k.out_box[0]} W {k.out_box[1]} from input H {k.in_box[0]} W {k.in_box[1]}")
    print(f"max |difference| before correction {np.abs(a - b).max():.3g}, after {np.abs(a - fixed).max():.3g}; "
          f"overhead {100 * overhead(v, kernels):.1f}% of the output")
    if args.json_out:
        write_json(args.json_out, {
            "problem": asdict(p), "transformation": t.name, "boxes": v.axis_boxes,
            "regions": [r.box for r in v.regions], "non_equivalent_regions": [r.box for r in v.non_equivalent],
            "positions_checked": v.positions_checked, "positions_total": v.positions_total,
            "tests": v.tests, "prime": v.prime, "bound": v.bound,
            "corrections": [asdict(k) for k in kernels], "overhead": overhead(v, kernels),
            "max_abs_difference_before": float(np.abs(a - b).max()),
            "max_abs_difference_after": float(np.abs(a - fixed).max())})
    return 0


def run_verify(args: argparse.Namespace) -> int:
    p = _problem(args)
    t = SpatialSplit(args.axis, args.parts)
    seam = (p.out_size(p.W) // args.parts) - 1
    position = (0, 0, p.out_size(p.H) // 2, seam) if args.axis == "W" else (0, 0, seam, p.out_size(p.W) // 2)
    rows = false_pass_rates(p, t, position, tests=args.trials, seed=args.seed)
    print(f"false-pass rate at seam position {position} over {args.trials} random tests (n = 2 inputs)")
    print(f"{'p':>5s} {'passes':>7s} {'rate':>8s} {'bound n/p':>10s}")
    for r in rows:
        print(f"{r.prime:5d} {r.passes:7d} {r.rate:8.4f} {r.bound:10.4f}")
    if args.json_out:
        write_json(args.json_out, {"position": position, "rows": [asdict(r) | {"rate": r.rate} for r in rows]})
    return 0


def run_optimize(args: argparse.Namespace) -> int:
    from pet.optimizer import beam_search, network

    layers = network(args.model, batch=args.batch)
    start, best, options = beam_search(layers, args.device, beam_width=args.beam, depth=args.depth,
                                       max_candidates=args.candidates)
    print(f"{args.model} ({len(layers)} convs, batch {args.batch}) on {args.device}: "
          f"{start.total_us:.1f} -> {best.total_us:.1f} µs ({start.total_us / best.total_us:.3f}x)")
    for i, (p, opts) in enumerate(zip(layers, options)):
        chosen = best.choices[i].transformation
        print(f"  layer {i}: {p.C}->{p.O} {p.H}x{p.W} dilation {p.dilation}; chosen: {chosen}")
        for o in opts:
            kind = "fully" if o.fully_equivalent else "partially"
            print(
                f"    {o.transformation:18s} {kind:9s} program {o.program_us:9.2f} µs + {o.corrections} correction(s) "
                f"{o.corrections_us:8.2f} µs (overhead {100 * o.overhead:.1f}% of the output) = {o.total_us:9.2f} µs"
            )
    measured = measure_options(layers, options, args.device) if args.measure else []
    if args.json_out:
        write_json(
            args.json_out,
            {
                "model": args.model,
                "device": args.device,
                "original_us": start.total_us,
                "best_us": best.total_us,
                "choices": [asdict(c) for c in best.choices],
                "options": [[asdict(o) for o in opts] for opts in options],
                "measured": measured,
            },
        )
    return 0


def measure_options(layers: list, options: list, device: str) -> list[dict]:
    """Every option of every layer timed in onnxruntime on this CPU, next to its price: the
    program and each correction kernel timed one after another (:func:`time_graph`), summed, less
    all but one run call. Identical layers (ResNet-18's four convs) are timed once."""
    from eqsat.cost.devices import ORT_CPU
    from eqsat.cost.measured import time_graph
    from eqsat.cost.registry import cost_model, measured_threads
    from pet.optimizer import option_graphs

    threads = measured_threads(device) or 1
    overhead = cost_model(ORT_CPU.with_threads(threads), progress=False).overhead_us
    rows = []
    timed: dict[tuple, float] = {}
    print(f"measured end to end (onnxruntime CPU, {threads} thread(s); the program and its corrections):")
    for i, (p, opts) in enumerate(zip(layers, options)):
        base = None
        for o in opts:
            if (p, o.transformation) not in timed:
                runs = [time_graph(g, threads).median_us for g in option_graphs(p, o.transformation)]
                timed[(p, o.transformation)] = sum(runs) - overhead * (len(runs) - 1)
            us = timed[(p, o.transformation)]
            base = us if base is None else base
            rows.append({"layer": i, "transformation": o.transformation, "predicted_us": o.total_us,
                         "measured_us": us, "measured_speedup": base / us})
            print(f"  layer {i} {o.transformation:18s} predicted {o.total_us:10.1f} µs  measured {us:10.1f} µs  "
                  f"{base / us:6.3f}x of the original")
    return rows
