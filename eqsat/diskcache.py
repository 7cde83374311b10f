"""A content-addressed cache on disk, so a second process redoes no rule parsing or compiling.

Entries depend only on their key (a rule's text, a file's bytes) and on this package's code and
egglog's version: both are folded into the cache file's name, so a code change or an egglog
upgrade starts a fresh cache. Files live in ``$EQSAT_LAB_CACHE`` (default
``~/.cache/eqsat-lab``); ``EQSAT_LAB_CACHE=off`` disables the cache. Files are written whole with
unique temporary names (two processes may write; the last complete file wins), and a cache file
that cannot be read is ignored and rewritten.
"""
from __future__ import annotations

import hashlib
import os
import pickle
from collections.abc import Callable
from functools import cache
from importlib import metadata
from pathlib import Path
from typing import Any

from eqsat.files import replace_atomic

PACKAGE_DIR = Path(__file__).parent


def cache_dir() -> Path | None:
    """Where cache files go (None: caching is off)."""
    where = os.environ.get("EQSAT_LAB_CACHE", "")
    if where.lower() in ("off", "0", "none"):
        return None
    return Path(where) if where else Path.home() / ".cache" / "eqsat-lab"


@cache
def code_fingerprint() -> str:
    """A hash of every source file of the package and of egglog's version."""
    h = hashlib.sha256()
    for f in sorted(PACKAGE_DIR.rglob("*.py")):
        h.update(str(f.relative_to(PACKAGE_DIR)).encode())
        h.update(f.read_bytes())
    try:
        h.update(metadata.version("egglog").encode())
    except metadata.PackageNotFoundError:  # pragma: no cover - egglog is a dependency
        pass
    return h.hexdigest()[:16]


class DiskMemo:
    """A dict kept in one pickle file per ``namespace`` and code fingerprint; read on first use,
    written by :meth:`save` when something was added."""

    def __init__(self, namespace: str):
        self.namespace = namespace
        self._data: dict[Any, Any] | None = None
        self._dirty = False
        self.hits = self.misses = 0

    @property
    def path(self) -> Path | None:
        where = cache_dir()
        return None if where is None else where / f"{self.namespace}-{code_fingerprint()}.pickle"

    def _load(self) -> dict[Any, Any]:
        if self._data is None:
            self._data = {}
            path = self.path
            if path is not None and path.exists():
                try:
                    with open(path, "rb") as fh:
                        loaded = pickle.load(fh)
                    if isinstance(loaded, dict):
                        self._data = loaded
                except Exception:  # a torn or foreign file: start afresh, it will be rewritten
                    self._data = {}
        return self._data

    def get(self, key: Any) -> Any:
        found = self._load().get(key)
        if found is None:
            self.misses += 1
        else:
            self.hits += 1
        return found

    def get_or_compute(self, key: Any, compute: Callable[[], Any]) -> Any:
        """The stored value of ``key``, or ``compute()``, stored."""
        found = self.get(key)
        if found is None:
            found = compute()
            self.put(key, found)
        return found

    def put(self, key: Any, value: Any) -> None:
        self._load()[key] = value
        self._dirty = True

    def save(self) -> None:
        path = self.path
        if not self._dirty or path is None or self._data is None:
            return
        data = pickle.dumps(self._data, protocol=pickle.HIGHEST_PROTOCOL)
        try:
            replace_atomic(path, lambda tmp: Path(tmp).write_bytes(data))
        except OSError:  # a read-only home: run without the cache
            return
        self._dirty = False


def content_key(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()
