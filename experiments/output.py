"""Writing experiment tables: one CSV and one JSON per table, written whole or not at all."""
from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from typing import Any, Mapping, Sequence


def write_atomic(path: Path, text: str) -> None:
    """Write ``text`` to a temp file and rename it into place (no torn files on a kill)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text)
    tmp.replace(path)


def write_table(out: Path, stem: str, rows: Sequence[Mapping[str, Any]], extra: Mapping[str, Any] | None = None) -> None:
    """``stem.csv`` (the rows) and ``stem.json`` (``extra`` fields plus ``rows``) in ``out``."""
    if not rows:
        raise ValueError(f"no rows to write for {stem}")
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=list(rows[0]))
    writer.writeheader()
    writer.writerows(rows)
    write_atomic(out / f"{stem}.csv", buf.getvalue())
    write_atomic(out / f"{stem}.json", json.dumps({**(extra or {}), "rows": list(rows)}, indent=1) + "\n")


def pyplot():
    """matplotlib's pyplot on the non-interactive Agg backend."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt
