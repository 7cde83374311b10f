"""Nightly fuzzing: the hypothesis suite of tests/test_fuzz.py at scale, for a time budget.

    python -m experiments.runs.bench_fuzz [--minutes 10] [--scale 20]

Runs ``pytest tests/test_fuzz.py`` again and again with ``EQSAT_FUZZ_SCALE=--scale`` (that many
times the CI's examples per test) and a new hypothesis seed each round, until ``--minutes`` have
passed; prints each round's outcome and exits 1 if any round failed (pytest prints the failing,
shrunk example). CI runs the same tests at scale 1, derandomized.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--minutes", type=float, default=10.0)
    ap.add_argument("--scale", type=int, default=20)
    ap.add_argument("--first-seed", type=int, default=1)
    args = ap.parse_args(argv)
    end = time.monotonic() + 60 * args.minutes
    env = dict(os.environ, EQSAT_FUZZ_SCALE=str(args.scale))
    failed, seed = [], args.first_seed
    while time.monotonic() < end:
        start = time.monotonic()
        cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(ROOT / "tests" / "test_fuzz.py"),
               f"--hypothesis-seed={seed}"]
        proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True)
        last = (proc.stdout.strip().splitlines() or ["(no output)"])[-1]
        print(f"seed {seed}: {last} ({time.monotonic() - start:.0f} s)", flush=True)
        if proc.returncode != 0:
            failed.append(seed)
            print(proc.stdout[-6000:], flush=True)
        seed += 1
    print(f"{seed - args.first_seed} rounds, {len(failed)} failed" + (f" (seeds {failed})" if failed else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
