"""``eqsat-lab experiment fuzz``: the hypothesis suite of tests/test_fuzz.py at scale, for a time budget.

Runs ``pytest tests/test_fuzz.py`` again and again with ``EQSAT_FUZZ_SCALE=--scale`` (that many
times the CI's examples per test) and a new hypothesis seed each round, until ``--minutes`` have
passed or ``--rounds`` rounds ran; prints and writes each round's outcome and exits 1 if any round
failed (pytest prints the failing, shrunk example). CI runs the same tests at scale 1, derandomized.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from experiments.output import write_table

ROOT = Path(__file__).resolve().parents[2]
FUZZ_TESTS = ROOT / "tests" / "test_fuzz.py"


def one_round(seed: int, scale: int, select: str) -> dict[str, Any]:
    """One pytest run of the fuzz tests (``select``: a ``-k`` expression, "" for all)."""
    start = time.monotonic()
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(FUZZ_TESTS), f"--hypothesis-seed={seed}"]
    cmd += ["-k", select] if select else []
    proc = subprocess.run(cmd, cwd=ROOT, env=dict(os.environ, EQSAT_FUZZ_SCALE=str(scale)), capture_output=True,
                          text=True)
    last = (proc.stdout.strip().splitlines() or ["(no output)"])[-1]
    print(f"seed {seed}: {last} ({time.monotonic() - start:.0f} s)", flush=True)
    if proc.returncode != 0:
        print(proc.stdout[-6000:], flush=True)
    return {"seed": seed, "scale": scale, "passed": proc.returncode == 0, "summary": last,
            "seconds": round(time.monotonic() - start, 1)}


def run(minutes: float, scale: int, first_seed: int, rounds: int, select: str, out: Path) -> list[dict[str, Any]]:
    """Rounds until the time is up (or ``rounds`` ran, when > 0); writes ``fuzz.csv``/``.json``."""
    if not FUZZ_TESTS.exists():
        raise FileNotFoundError(f"{FUZZ_TESTS}: the fuzz tests ship with the source tree, not the package")
    end = time.monotonic() + 60 * minutes
    rows: list[dict[str, Any]] = []
    seed = first_seed
    while time.monotonic() < end and (rounds <= 0 or len(rows) < rounds):
        rows.append(one_round(seed, scale, select))
        seed += 1
    failed = [r["seed"] for r in rows if not r["passed"]]
    print(f"{len(rows)} rounds, {len(failed)} failed" + (f" (seeds {failed})" if failed else ""))
    if rows:
        write_table(out, "fuzz", rows, {"minutes": minutes, "select": select})
    return rows


def main(args: argparse.Namespace) -> int:
    rows = run(args.minutes, args.scale, args.first_seed, args.rounds, args.select, Path(args.out))
    if not rows:
        raise ValueError(f"--minutes {args.minutes}: no round fits in the time given")
    return 1 if any(not r["passed"] for r in rows) else 0
