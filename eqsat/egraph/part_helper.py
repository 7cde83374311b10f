"""The saturation worker as a second solver for the exact extraction's parts
(:class:`~eqsat.egraph.split.PartHelper`): idle while its parent extracts, it answers ``("solve",
...)`` messages between jobs (see ``optimize._worker``)."""
from __future__ import annotations

from typing import Any

from eqsat.egraph.solvers import Program, Solution, get_solver


def solve_one(conn: Any, solver: str, program: Program, seconds: float, start: Any, nodes: int | None) -> None:
    """Solve one program for the parent (see :class:`WorkerHelper`) and send the answer."""
    try:
        answer = get_solver(solver).solve(program, seconds, start, nodes)
    except Exception as exc:  # the parent solves it itself
        conn.send(("error", f"{type(exc).__name__}: {exc}"))
        return
    conn.send(("solved", answer))


class WorkerHelper:
    """The saturation worker as a :class:`~eqsat.egraph.split.PartHelper`: idle while this process
    extracts, it solves the parts it is sent, in order, while this process solves others (2 cores:
    NasRNN's four cells, about 0.1 s each, two at a time)."""

    def __init__(self, worker: Any, solver: str):  # an optimize.SaturationWorker (its conn, alive, close)
        self.worker, self.solver, self.pending = worker, solver, 0

    def submit(self, program: Program, seconds: float, start: Any, nodes: int | None) -> bool:
        if not self.worker.alive:
            return False
        try:
            self.worker.conn.send(("solve", self.solver, program, seconds, start, nodes))
        except OSError:
            self.worker.close()
            return False
        self.pending += 1
        return True

    def result(self, seconds: float) -> Solution | None:
        if not self.pending:
            return None
        self.pending -= 1
        try:
            if self.worker.conn.poll(seconds):
                kind, payload = self.worker.conn.recv()
                return payload if kind == "solved" else None
        except (EOFError, OSError):
            pass
        self.worker.close()  # no answer in time: the next job gets a new worker, with nothing left in the pipe
        self.pending = 0  # the caller solves the rest itself
        return None
