"""Two processes as each other's second solver for an exact extraction's parts
(:class:`~eqsat.egraph.split.PartHelper`): the saturation worker, idle while its parent extracts,
answers ``("solve", ...)`` messages between jobs (see ``optimize._worker``); the parent, waiting
for a job's end, answers those of the worker's own merge judges and final proof (see
:class:`~eqsat.egraph.judging.MergeJudge` and ``SaturationWorker.saturate``)."""
from __future__ import annotations

import threading
from multiprocessing.reduction import ForkingPickler
from typing import Any

from eqsat.egraph.solvers import Program, Solution, get_solver


def solve_one(conn: Any, solver: str, program: Program, seconds: float, start: Any, nodes: int | None) -> None:
    """Solve one program for the other process (see :class:`WorkerHelper`) and send the answer."""
    try:
        answer = get_solver(solver).solve(program, seconds, start, nodes)
    except Exception as exc:  # the other process solves it itself
        conn.send(("error", f"{type(exc).__name__}: {exc}"))
        return
    conn.send(("solved", answer))


class WorkerHelper:
    """The saturation worker as a :class:`~eqsat.egraph.split.PartHelper`: idle while this process
    extracts, it solves the parts it is sent, in order, while this process solves others (2 cores:
    NasRNN's four cells, about 0.1 s each, two at a time).

    The worker reads a part only when it is done with the one before, and a socket holds about
    200 KB: NasRNN's proof sends three parts of 118, 235 and 235 KB, and the second and third
    writes held this process 43 and 120 ms before it could solve its own. So each part is
    pickled here and written by a thread of its own (each after the one before), and this
    process goes on to its parts at once."""

    def __init__(self, worker: Any, solver: str):  # an optimize.SaturationWorker (its conn, alive, close)
        self.worker, self.solver, self.pending = worker, solver, 0
        self.writing: threading.Thread | None = None  # the last part's write

    def submit(self, program: Program, seconds: float, start: Any, nodes: int | None) -> bool:
        if not self.worker.alive:
            return False
        data = ForkingPickler.dumps(("solve", self.solver, program, seconds, start, nodes))
        self.writing = threading.Thread(target=self._write, args=(self.writing, data), daemon=True)
        self.writing.start()
        self.pending += 1
        return True

    def _write(self, before: threading.Thread | None, data: Any) -> None:
        if before is not None:
            before.join()
        try:
            self.worker.conn.send_bytes(data)
        except (OSError, ValueError):  # closed: result() finds no answer, and the caller solves the part
            pass

    def _written(self) -> None:
        """Wait for the writes (none left running: a worker forked later must see no other thread)."""
        if self.writing is not None:
            self.writing.join()
            self.writing = None

    def result(self, seconds: float) -> Solution | None:
        if not self.pending:
            return None
        self.pending -= 1
        try:
            if self.worker.conn.poll(seconds):
                kind, payload = self.worker.conn.recv()
                if not self.pending:
                    self._written()
                return payload if kind == "solved" else None
        except (EOFError, OSError):
            pass
        self.worker.close()  # no answer in time: the next job gets a new worker, with nothing left in the pipe
        self._written()  # (the close ends a write still held)
        self.pending = 0  # the caller solves the rest itself
        return None


class ParentEnd:
    """The saturation worker's end of its pipe, as the ``worker`` a :class:`WorkerHelper` sends to:
    the parent, waiting for the job's end, solves the parts of the worker's merge judges. A part
    whose answer does not come in time closes this end for the rest of the job (the worker solves
    the rest itself); an answer that comes later is skipped between jobs (``optimize._worker``)."""

    def __init__(self, conn: Any):
        self.conn, self.alive = conn, True

    def close(self) -> None:
        self.alive = False
