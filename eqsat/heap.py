"""Giving freed heap memory, and the pages of mapped files, back to the operating system.

onnxruntime sessions and PyTorch modules of a large model free gigabytes when closed, but glibc
keeps the pages for later use, so the process stays as large as its sessions were; the e-graph's
extraction caps this process's resident memory and gave up after a BERT's timing sessions.
An imported model's weights are a file mapped read-only (:func:`map_file`): the pages read so
far (the writer streams every weight once) count in this process's resident memory until given
back, though the page cache holds them anyway.
Shared by the measured devices' timers, the ONNX reader and the ONNX check, so it sits below them.
"""
from __future__ import annotations

import mmap
import weakref
from functools import cache
from pathlib import Path
from typing import Any

_MAPPED: weakref.WeakSet[mmap.mmap] = weakref.WeakSet()  # the files map_file mapped, while in use


def release_freed_memory() -> None:
    """Hand the heap the closed sessions freed back to the OS (glibc's ``malloc_trim``; nothing
    elsewhere), and drop the pages of mapped files from this process (:func:`release_mapped`)."""
    trim = _malloc_trim()
    if trim is not None:
        trim(0)
    release_mapped()


def map_file(path: str | Path) -> mmap.mmap:
    """The file ``path`` mapped read-only: its bytes are read from the page cache when touched,
    never copied onto the heap, and :func:`release_mapped` drops the pages touched so far. A
    ValueError for an empty file, an OSError for one that cannot be mapped (not a regular file).
    The file must not change in place while mapped (replacing it by a rename is fine)."""
    with open(path, "rb") as f:
        mapped = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    _MAPPED.add(mapped)
    return mapped


def release_mapped() -> None:
    """Drop the pages of every file :func:`map_file` mapped from this process's resident memory
    (``madvise(MADV_DONTNEED)``: they are clean, so the next read maps them again from the page
    cache; a few ms for a 440 MB BERT). Called before and after the large onnxruntime sessions
    open: after the writer read every weight once, a BERT check session opened beside them."""
    advice = getattr(mmap, "MADV_DONTNEED", None)
    if advice is None:  # not Linux: the OS decides
        return
    for mapped in list(_MAPPED):
        if not mapped.closed:
            mapped.madvise(advice)


@cache
def _malloc_trim() -> Any:
    import ctypes
    import ctypes.util

    name = ctypes.util.find_library("c")
    try:
        return getattr(ctypes.CDLL(name), "malloc_trim", None) if name else None
    except OSError:
        return None
