"""Writing experiment tables: one CSV and one JSON per table, written whole or not at all."""
from __future__ import annotations

import csv
import io
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from eqsat.files import replace_atomic, write_atomic


def save_figure(fig: Any, path: str | Path, **kwargs: Any) -> None:
    """``fig.savefig`` written whole or not at all (a killed run left half a PNG); the format
    comes from ``path``'s suffix, since the temp name's is ``.tmp``."""
    fmt = Path(path).suffix.lstrip(".") or "png"
    replace_atomic(path, lambda tmp: fig.savefig(tmp, format=fmt, **kwargs))


def write_json(path: str | Path, payload: Any) -> None:
    """Write JSON atomically (see :func:`write_atomic`)."""
    write_atomic(Path(path), json.dumps(payload, indent=2) + "\n")


def write_table(
    out: Path, stem: str, rows: Sequence[Mapping[str, Any]], extra: Mapping[str, Any] | None = None
) -> None:
    """``stem.csv`` (the rows) and ``stem.json`` (``extra`` fields plus ``rows``) in ``out``."""
    if not rows:
        raise ValueError(f"no rows to write for {stem}")
    buf = io.StringIO()
    fields = list(dict.fromkeys(k for r in rows for k in r))  # every row's columns (a failed row has fewer)
    writer = csv.DictWriter(buf, fieldnames=fields, restval="")
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


def write_report(out: Path, stem: str, rows: Sequence[Mapping[str, Any]], extra: Mapping[str, Any], table: str,
                 note: str, command: str = "") -> None:
    """``stem.csv``/``.json`` (:func:`write_table`) and ``stem.md`` (the command, the table, the
    note), and the table and note printed: what an experiment with one table leaves behind."""
    write_table(out, stem, rows, extra)
    write_atomic(out / f"{stem}.md", (f"`{command}`\n\n" if command else "") + table + "\n\n" + note + "\n")
    print(table)
    print(note)
