"""``"module:name"`` references: how a table's row names code that loads late (onnxruntime,
PyTorch, the e-graph's worker) or lives in a package above the one holding the table (a search,
a tuned cost model, an experiment's cell function), without importing it."""
from __future__ import annotations

import importlib
from typing import Any


def resolve(ref: str) -> Any:
    """What ``ref`` (``"package.module:name"``) names, its module imported now. A reference
    without both parts is a ValueError naming it (a row's typo, caught when the row is used)."""
    module, colon, name = ref.partition(":")
    if not (module and colon and name):
        raise ValueError(f"{ref!r} is not a 'module:name' reference")
    return getattr(importlib.import_module(module), name)
