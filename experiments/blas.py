"""One BLAS thread for the ``eqsat-lab`` process unless the user sets one.

The command line's BLAS work is the final check's products (a 64x1024 by 1024x1024 matmul per
linear layer of BERT). OpenBLAS's worker threads spin while they wait for a core, so on a busy
2-core machine a second thread makes each such product several times slower (measured at load
average 4.4: 54 ms with two threads, 6 ms with one); on an idle one it saves at most half. The
setting must be in the environment before NumPy loads OpenBLAS, so importing this module sets it
and ``experiments.cli`` imports it before anything that imports NumPy; a library must not change
its host's threads, so nothing else imports it.
"""
from __future__ import annotations

import os

BLAS_THREAD_VARS = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")


def one_blas_thread() -> None:
    """Set each BLAS library's thread count to 1 where the environment does not already set it."""
    if not any(v in os.environ for v in BLAS_THREAD_VARS):
        os.environ["OPENBLAS_NUM_THREADS"] = "1"


one_blas_thread()
