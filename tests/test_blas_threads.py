"""The ``eqsat-lab`` process runs one BLAS thread unless the user sets one: OpenBLAS's second thread
spins for a core on a busy machine and slows the check's products several times."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
THREADS = "import experiments.cli, numpy, os; print(len(os.listdir('/proc/self/task')))"


def _threads(extra: dict[str, str]) -> int:
    env = {k: v for k, v in os.environ.items() if not k.endswith("_NUM_THREADS")} | extra
    env["PYTHONPATH"] = str(ROOT)
    done = subprocess.run([sys.executable, "-c", THREADS], env=env, capture_output=True, text=True, check=True)
    return int(done.stdout)


@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="threads are counted in /proc")
def test_the_cli_loads_openblas_with_one_thread_unless_the_user_sets_more():
    assert _threads({}) == 1
    if (os.cpu_count() or 1) > 1:
        assert _threads({"OPENBLAS_NUM_THREADS": "2"}) == 2
