"""The saturation worker's life as a process: how it starts (:func:`start_method`), that it dies
with its parent (:func:`die_with_parent`), and the modules it imports ahead of need."""
from __future__ import annotations

import contextlib
import ctypes
import importlib
import os
import signal
import sys
import threading
from collections.abc import Sequence

PR_SET_PDEATHSIG = 1  # linux/prctl.h
PARENT_POLL_S = 1.0  # an idle worker checks this often that its parent still lives


def die_with_parent(parent: int) -> None:
    """Have the kernel kill this process when ``parent`` dies (Linux's PR_SET_PDEATHSIG): a
    parent killed by its pid alone (not its group) left the worker waiting in ``recv`` for
    minutes. Elsewhere the idle loop's ``os.getppid()`` check does it."""
    if sys.platform == "linux":
        try:
            ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
        except (OSError, AttributeError):  # pragma: no cover - no libc symbol: the poll still works
            pass
    if os.getppid() != parent:  # it died before the request took effect
        os._exit(0)


def import_all(modules: Sequence[str]) -> None:
    """Import ``modules`` now, ahead of their first use; one missing is skipped (an optional
    solver's own error comes when it is used)."""
    for name in modules:
        with contextlib.suppress(ImportError):
            importlib.import_module(name)


def start_method() -> str:
    """``fork`` where it is safe, else ``spawn``. A forked worker inherits this process's imports
    and is ready sooner than a spawned one, which re-imports everything (a visible share of a small
    model's run). It is safe only on Linux, before egglog is loaded here (a copy of its worker threads' locks could
    hang the child) and while no other Python thread runs (one could hold the import lock). The
    one native thread NumPy's BLAS keeps is idle, and OpenBLAS resets its pool in a forked child.
    The two processes share their pages until one writes a page, and a garbage collection writes
    to every object it walks, so the fork happens with the heap frozen (``gc.freeze``): the
    child's imports took 62-70 ms, now 36-41 ms, and this process's rule parse 0.08 s, now 0.02 s."""
    lone = threading.active_count() == 1 and not {"egglog", "egglog.bindings"} & sys.modules.keys()
    return "fork" if sys.platform == "linux" and lone else "spawn"
