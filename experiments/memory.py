"""Process-wide memory settings for the command line: large arrays without allocation stalls.

Checking a result evaluates both graphs on random leaves, which allocates and frees many arrays
of megabytes (a BERT check: hundreds of 8-24 MB temporaries). Two defaults make each such
allocation touch fresh pages from the kernel, and on this project's reference machine (transparent
huge pages with ``defrag=madvise``) the first touch can stall in direct compaction:

* NumPy advises huge pages for arrays of 4 MB and more (``madvise``), which opts them into the
  synchronous compaction;
* glibc serves blocks over its mmap threshold with ``mmap`` and returns them with ``munmap``, so
  the next array of the same size faults its pages in again.

On BERT's check (the same two graphs, fresh processes) the defaults made it several times
slower than with both settings off. A library must not change these for its host program, so only
the ``eqsat-lab`` process calls :func:`reuse_large_blocks`.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import sys

M_TRIM_THRESHOLD = -1  # glibc's mallopt parameters
M_MMAP_THRESHOLD = -3
KEEP_BYTES = 256 * 2**20  # blocks below this come from the heap and are reused once freed


def reuse_large_blocks() -> None:
    """Turn NumPy's huge-page advice off and let glibc reuse freed blocks up to 256 MB (no-op
    elsewhere)."""
    try:
        from numpy._core import multiarray
        multiarray._set_madvise_hugepage(False)
    except (ImportError, AttributeError):  # another NumPy layout: keep its default
        pass
    if not sys.platform.startswith("linux"):
        return
    name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(name) if name else None
        if libc is not None and hasattr(libc, "mallopt"):
            libc.mallopt(M_MMAP_THRESHOLD, KEEP_BYTES)
            libc.mallopt(M_TRIM_THRESHOLD, 4 * KEEP_BYTES)
    except OSError:  # not glibc (musl): nothing to tune
        pass
