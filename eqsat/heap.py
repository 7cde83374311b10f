"""Giving freed heap memory back to the operating system.

onnxruntime sessions and PyTorch modules of a large model free gigabytes when closed, but glibc
keeps the pages for later use, so the process stays as large as its sessions were; the e-graph's
extraction caps this process's resident memory and gave up after a BERT's timing sessions.
Shared by the measured devices' timers and the ONNX check, so it sits below both.
"""
from __future__ import annotations

from functools import cache
from typing import Any


def release_freed_memory() -> None:
    """Hand the heap the closed sessions freed back to the OS (glibc's ``malloc_trim``; nothing
    elsewhere)."""
    trim = _malloc_trim()
    if trim is not None:
        trim(0)


@cache
def _malloc_trim() -> Any:
    import ctypes
    import ctypes.util

    name = ctypes.util.find_library("c")
    try:
        return getattr(ctypes.CDLL(name), "malloc_trim", None) if name else None
    except OSError:
        return None
