"""Experiment cells: run them locally in parallel or on Ray, save each one, resume from the folder.

An experiment is a list of :class:`Cell` values: a function (``"module:function"``) and the
keyword arguments that identify the cell. :func:`run_cells` runs every cell whose result is not
already in ``out/cells/<experiment>/`` and writes each result there as soon as it finishes, so an
interrupted sweep resumes where it stopped and a finished one is only read back. Cell functions
are plain top-level functions returning JSON-serializable dicts; they take every random choice
from their arguments (a ``seed`` among them), so a cell's result depends only on its key. How the
cells are run (processes, Ray, a progress bar) is one :class:`RunOptions` value, never part of a key.
"""
from __future__ import annotations

import contextlib
import hashlib
import json
import multiprocessing
import re
import warnings
from collections.abc import Iterable, Sequence
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tqdm import tqdm

from eqsat.files import write_atomic
from eqsat.refs import resolve

EXECUTORS = ("local", "ray")
# tqdm's monitor thread made every cell's e-graph worker start by spawn, not fork (a worker forks
# only from a lone thread, see eqsat.egraph.process.start_method): 0.3 s of start-up, every import
# done again. Bars here are updated by each finished cell; none needs the monitor.
tqdm.monitor_interval = 0


@dataclass(frozen=True)
class RunOptions:
    """How a run is executed, not what it computes: ``workers`` local processes running cells,
    the ``executor`` (``"local"``, or ``"ray"`` for a Ray cluster) and whether a progress bar
    shows. Results never depend on it, so it is no part of a cell's key; the command line builds
    one from ``--workers``/``--executor`` (:func:`experiments.command.run_options`)."""

    workers: int = 1
    executor: str = "local"
    progress: bool = True

    def __post_init__(self) -> None:
        if self.executor not in EXECUTORS:
            raise ValueError(f"unknown executor {self.executor!r}; choose one of {', '.join(EXECUTORS)}")
        if self.workers < 1:
            raise ValueError(f"workers must be >= 1, got {self.workers}")


@dataclass(frozen=True)
class Cell:
    """One unit of an experiment: ``fn(**params)`` for a function named ``module:function``."""

    experiment: str
    fn: str
    params: tuple[tuple[str, Any], ...]

    @classmethod
    def of(cls, experiment: str, fn: str, **params: Any) -> Cell:
        return cls(experiment, fn, tuple(sorted(params.items())))

    @property
    def kwargs(self) -> dict[str, Any]:
        return dict(self.params)

    @property
    def slug(self) -> str:
        """A file name that names the cell and cannot collide (readable part + hash of the key: the
        function, the parameters and the content of every file a parameter names, so a changed
        device profile or model is a new cell, not the old one's result under its path)."""
        readable = "-".join(f"{v}" for _, v in self.params)
        readable = re.sub(r"[^A-Za-z0-9_.=-]+", "_", readable)[:80]
        files = input_hashes(self.params)
        key = [self.fn, self.params] + ([files] if files else [])  # unchanged keys for cells reading no file
        digest = hashlib.sha1(json.dumps(key, default=str).encode()).hexdigest()[:8]
        return f"{readable}-{digest}"

    def path(self, out: Path) -> Path:
        return out / "cells" / self.experiment / f"{self.slug}.json"


_HASHED: dict[tuple[str, int, int], str] = {}  # (path, size, mtime_ns) -> content hash, once per process


def input_hashes(params: tuple[tuple[str, Any], ...]) -> dict[str, str]:
    """The SHA-256 of each file a parameter names (a string, or a list of strings, that is an
    existing file: a ``--device`` profile, a model), by the parameter and its text."""
    found: dict[str, str] = {}
    for name, value in params:
        for item in value if isinstance(value, (list, tuple)) else (value,):
            if not isinstance(item, str) or not item or not Path(item).is_file():
                continue
            st = Path(item).stat()
            memo = (str(Path(item).resolve()), st.st_size, st.st_mtime_ns)
            if memo not in _HASHED:
                h = hashlib.sha256()
                with open(item, "rb") as fh:
                    for block in iter(lambda: fh.read(1 << 20), b""):
                        h.update(block)
                _HASHED[memo] = h.hexdigest()
            found[f"{name}={item}"] = _HASHED[memo]
    return found


def run_cell(cell: Cell) -> dict[str, Any]:
    """Run one cell in this process."""
    return resolve(cell.fn)(**cell.kwargs)


def prefetch(cell: Cell, running: Cell) -> None:
    """Let ``cell``'s function start that cell's fixed work while ``running`` runs in this process,
    through its optional ``prefetch(params, running_params)`` attribute (``compare``: the e-graph's
    worker loads a model's rules while the α search of that model runs). It never raises: a
    prefetch that fails costs the work it would have saved, and the cell reports its own errors."""
    with contextlib.suppress(Exception):
        hook = getattr(resolve(cell.fn), "prefetch", None)
        if hook is not None:
            hook(cell.kwargs, running.kwargs)


def load_finished(cell: Cell, out: Path, damaged: list[str] | None = None) -> dict[str, Any] | None:
    """The saved result of ``cell`` if its file exists and holds this exact cell, else None. A
    damaged file is recomputed (never deleted): a warning, or a line appended to ``damaged`` for
    the caller's one warning."""
    path = cell.path(out)
    if not path.exists():
        return None
    try:
        saved = json.loads(path.read_bytes())
        if not isinstance(saved, dict) or not isinstance(saved.get("result"), dict) \
                or not isinstance(saved.get("fn"), str) or not isinstance(saved.get("params"), dict):
            raise ValueError("not a saved cell")
    except (OSError, ValueError, RecursionError) as exc:  # torn by a killed run, or edited: recompute it
        why = str(exc) if str(exc) == "not a saved cell" else type(exc).__name__
        if damaged is None:
            warnings.warn(f"{path}: damaged cell file ({why}); computing the cell again", stacklevel=2)
        else:
            damaged.append(f"{path}: damaged cell file ({why})")
        return None
    if saved.get("fn") != cell.fn or saved.get("params") != json.loads(json.dumps(cell.kwargs)):
        return None
    return saved["result"]


def _save(cell: Cell, out: Path, result: dict[str, Any]) -> None:
    write_atomic(cell.path(out), json.dumps({"fn": cell.fn, "params": cell.kwargs, "result": result}, indent=1) + "\n")


def run_cells(cells: Sequence[Cell], out: Path, *, options: RunOptions = RunOptions(),
              desc: str = "cells") -> list[dict[str, Any]]:
    """Results of ``cells`` in order, computing only those not already saved under ``out``.

    With ``options.executor == "local"`` cells run in this process (``workers=1``) or in
    ``options.workers`` spawned processes; ``"ray"`` submits them as Ray tasks to the cluster
    ``ray.init()`` finds (a local one if none is configured; set ``RAY_ADDRESS`` to use a real
    cluster). ``options.progress`` shows a bar named ``desc``.
    """
    results: dict[Cell, dict[str, Any]] = {}
    todo: list[Cell] = []
    damaged: list[str] = []
    for cell in cells:
        done = load_finished(cell, out, damaged)
        if done is None:
            todo.append(cell)
        else:
            results[cell] = done
    if damaged:
        warnings.warn(f"{len(damaged)} damaged cell file(s) computed again: " + "; ".join(damaged[:3])
                      + ("; ..." if len(damaged) > 3 else ""), stacklevel=2)
    bar = tqdm(total=len(cells), initial=len(results), desc=desc, disable=not options.progress, leave=False)
    for cell, result in _execute(todo, options):
        _save(cell, out, result)
        results[cell] = result
        bar.update()
    bar.close()
    return [results[c] for c in cells]


def _execute(cells: Sequence[Cell], options: RunOptions) -> Iterable[tuple[Cell, dict[str, Any]]]:
    if not cells:
        return
    if options.executor == "ray":
        yield from _execute_ray(cells)
    elif options.workers == 1:
        for k, cell in enumerate(cells):
            if k + 1 < len(cells):
                prefetch(cells[k + 1], cell)
            yield cell, run_cell(cell)
    else:
        with ProcessPoolExecutor(max_workers=options.workers, mp_context=multiprocessing.get_context("spawn")) as pool:
            pending = {pool.submit(run_cell, c): c for c in cells}
            while pending:
                finished, _ = wait(pending, return_when=FIRST_COMPLETED)
                for fut in finished:
                    yield pending.pop(fut), fut.result()


def _execute_ray(cells: Sequence[Cell]) -> Iterable[tuple[Cell, dict[str, Any]]]:
    try:
        import ray
    except ImportError as exc:  # pragma: no cover - depends on the optional extra
        raise ValueError("--executor ray needs the optional extra: pip install 'eqsat-lab[ray]'") from exc
    if not ray.is_initialized():
        ray.init(log_to_driver=False)
    remote = ray.remote(run_cell)
    pending = {remote.remote(c): c for c in cells}
    while pending:
        ready, _ = ray.wait(list(pending), num_returns=1)
        for ref in ready:
            yield pending.pop(ref), ray.get(ref)
