"""Mixed 0/1 programs and the solvers that can answer them, as one table.

Extraction states its problem once (:class:`Program`: minimize ``cost @ x`` subject to
``lower <= matrix @ x <= upper`` over 0/1 variables, some fixed to 1) and any
row of :data:`SOLVERS` solves it, within a budget of branch-and-bound ``nodes`` (work, so the
same program gets the same answer on a busy machine) and of ``seconds`` (the safety net: a
:class:`Solution` the clock stopped says so in ``clock``). HiGHS through ``highspy`` is the
default: it installs from the package index, accepts a starting solution (the greedy extraction) and reports its bound.
``scipy`` runs the same HiGHS without a start; SCIP (``pyscipopt``, TENSAT's solver) and OR-Tools'
CP-SAT are optional extras measured side by side by ``eqsat-lab experiment extraction``.
"""
from __future__ import annotations

import contextlib
import os
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

REL_GAP = 1e-4  # "optimal" means proved within 0.01% (HiGHS's default)
# HiGHS's primal heuristics, off when a start is given: on the programs of TENSAT's seven models
# (warm-started from the greedy or the last judge's answer) they found no cheaper answer, and their
# root time was a quarter of HiGHS's (NasRNN's 40 programs 821 -> 640 ms, Inception-v3's 490 -> 331)
START_HEURISTICS_OFF = ("mip_heuristic_run_feasibility_jump", "mip_heuristic_run_rins", "mip_heuristic_run_rens",
                        "mip_heuristic_run_root_reduced_cost", "mip_heuristic_run_zi_round",
                        "mip_heuristic_run_shifting")


@dataclass(frozen=True)
class Rows:
    """A program's constraint matrix in compressed sparse rows, as three arrays: what every solver
    reads, without ``scipy.sparse`` (0.12-0.19 s to import, a quarter of a small model's search in a
    fresh process). :meth:`tocsc` gives the columns HiGHS takes, in ``scipy``'s order."""

    indptr: np.ndarray
    indices: np.ndarray
    data: np.ndarray
    shape: tuple[int, int]

    def tocsc(self) -> Rows:
        """The same matrix by columns (``indptr`` over columns, ``indices`` the rows), entries of a
        column in row order."""
        rows = np.repeat(np.arange(self.shape[0], dtype=np.int32), np.diff(self.indptr))
        order = np.argsort(self.indices, kind="stable")
        counts = np.bincount(self.indices, minlength=self.shape[1])
        indptr = np.concatenate(([0], np.cumsum(counts))).astype(np.int32)
        return Rows(indptr, rows[order], self.data[order], self.shape)


@dataclass(frozen=True)
class Program:
    """``min cost @ x`` s.t. ``lower <= matrix @ x <= upper`` over binary ``x``; ``fixed[k]``: x[k] = 1.
    ``col_upper`` (default all 1) and ``integral`` (default all True) let some columns be general:
    the e-class levels of the acyclic formulation are continuous in ``[0, size of their cycle component]``."""

    cost: np.ndarray
    matrix: Any  # rows x variables, by rows: :class:`Rows` (or a scipy.sparse.csr_matrix)
    lower: np.ndarray
    upper: np.ndarray
    fixed: np.ndarray
    col_upper: np.ndarray | None = None
    integral: np.ndarray | None = None
    relaxation: bool = False  # solve_highs tries its linear relaxation first (it carries program.need_rows)

    @property
    def ub(self) -> np.ndarray:
        return np.ones(self.cost.size) if self.col_upper is None else self.col_upper

    @property
    def is_int(self) -> np.ndarray:
        return np.ones(self.cost.size, dtype=bool) if self.integral is None else self.integral

    @property
    def has_levels(self) -> bool:
        """Whether some column is continuous: the levels of the proof over an e-graph's cycles."""
        return self.integral is not None and not bool(self.integral.all())


@dataclass(frozen=True)
class Solution:
    """A solver's answer: values (None when it found none), objective, proved lower bound, whether
    it proved optimality, its status in words, seconds until its first feasible solution, and
    whether the time limit (not the node budget or a proof) stopped it: then the answer depends
    on the machine's speed and load."""

    x: np.ndarray | None
    objective: float
    bound: float
    optimal: bool
    status: str
    first_incumbent_s: float | None
    clock: bool = False
    nodes: int = 0  # branch-and-bound nodes explored (the work the ``nodes`` budget counts)


@contextlib.contextmanager
def _stdout_silenced() -> Iterator[None]:
    """File descriptor 1 to /dev/null for a moment (C++ code prints past ``sys.stdout``)."""
    sys.stdout.flush()
    saved = os.dup(1)
    try:
        with open(os.devnull, "w") as null:
            os.dup2(null.fileno(), 1)
        yield
    finally:
        os.dup2(saved, 1)
        os.close(saved)


def _run_interruptible(h: Any) -> None:
    """``h.run()`` in highspy's solver thread while this thread waits, so that Ctrl-C reaches
    Python here: the solve is cancelled and KeyboardInterrupt raised. Run in this thread, Python's
    handler ran inside the first callback HiGHS made into Python and pybind11 swallowed it there:
    the run went on and exited 0."""
    h.HandleUserInterrupt = True  # the solver checks cancelSolve's flag
    solver = h.startSolve()
    try:
        while solver.is_alive():
            solver.join(0.1)
    except KeyboardInterrupt:
        h.cancelSolve()
        solver.join()
        raise


def solve_highs(p: Program, seconds: float, start: np.ndarray | None, nodes: int | None = None) -> Solution:
    """HiGHS through ``highspy``: warm-started from ``start``, first incumbent timed by callback; one
    thread and ``mip_max_nodes``, so only ``seconds`` can make two runs differ.

    HiGHS 1.16 can answer a warm-started program with the right objective and bound but the start
    as its values: when presolve's reduced program holds the optimum, the values it restores are
    the start's. On MobileViT's e-graph that kept an extraction 21% dearer than its own proved
    optimum. An answer whose values do not cost its objective is solved again without the start."""
    began = time.perf_counter()
    if p.relaxation:
        relaxed = _relaxation_answer(p, seconds, start)
        if relaxed is not None:
            return relaxed
    sol = _highs_run(p, seconds - (time.perf_counter() - began), start, nodes)
    if start is None or sol.x is None or _agrees(p, sol):
        return sol
    again = _highs_run(p, seconds - (time.perf_counter() - began), None, nodes)
    if again.x is None or not _agrees(p, again):  # the start stands, as what it is: feasible, unproved
        return replace(sol, objective=float(p.cost @ sol.x), optimal=False, status=f"{sol.status} (values: the start)",
                       clock=sol.clock or again.clock, nodes=sol.nodes + again.nodes)
    return replace(again, first_incumbent_s=0.0, nodes=sol.nodes + again.nodes)


INTEGRAL_TOL = 1e-6  # a relaxation's value this close to 0 or 1 is taken as that
RELAXATION_STATUS = "Optimal (linear relaxation"  # how an answer the relaxation gave begins


@dataclass
class RelaxationRecord:
    """How often the linear relaxation answered the programs of this search's extractions so far
    (each search resets it), kept apart for programs with level columns (the proof over an
    e-graph's cycles) and without (the cycle filter's, a merge judge's): a program carries need
    rows and tries the relaxation first (:attr:`Program.relaxation`) while that kind's answers
    are at least one in three. A model's programs of one kind are alike, the two kinds not: the
    relaxations answered all of NasRNN's, 5 of Inception-v3's 17 judge programs and 6 of its 8
    proof programs, 1 of BERT's 3 and all 4, and none of NASNet-A's, where each try cost 5-15%
    of the solve it preceded. It is noted once an extraction ends, in the order of its parts, so
    the process that solves a part (a helper or this one) never changes what is tried, nor, where
    optima tie, which optimum is answered."""

    tried: dict[bool, int] = field(default_factory=lambda: {False: 0, True: 0})  # by "has levels"
    answered: dict[bool, int] = field(default_factory=lambda: {False: 0, True: 0})

    def worth_trying(self, levels: bool) -> bool:
        return self.tried[levels] < 2 or 3 * self.answered[levels] >= self.tried[levels]

    def note(self, tries: list[tuple[Program, Solution]]) -> None:
        """Count the answers to programs that tried the relaxation (``tries``: only those)."""
        for p, s in tries:
            self.tried[p.has_levels] += 1
            self.answered[p.has_levels] += s.status.startswith(RELAXATION_STATUS)

    def reset(self) -> None:
        for kind in (False, True):
            self.tried[kind] = self.answered[kind] = 0

    def saved(self) -> tuple[dict[bool, int], dict[bool, int]]:
        """The record as it is now, for :meth:`restore` (an extraction whose answer goes unused)."""
        return dict(self.tried), dict(self.answered)

    def restore(self, saved: tuple[dict[bool, int], dict[bool, int]]) -> None:
        self.tried.update(saved[0])
        self.answered.update(saved[1])


RELAXATIONS = RelaxationRecord()


def _relaxation_answer(p: Program, seconds: float, start: np.ndarray | None) -> Solution | None:
    """The program's answer from its linear relaxation alone, or None: where the relaxation's
    optimum is integral it is the program's (its levels, continuous, are feasible as they are),
    and where it is no lower than the start's cost the start is optimal. With the need rows
    (:func:`eqsat.egraph.program.need_rows`) NasRNN's judges' relaxations are integral: the
    simplex without presolve takes 1-7 ms where HiGHS's branch and bound took 8-33 ms, almost
    all of it presolve and cuts at the root. A program with level columns (the proof over an
    e-graph's cycles) also carries :func:`~eqsat.egraph.program.two_cycle_rows`: without them and
    the need rows its big-M level rows left NasRNN's proof cell at 128 against 252; with them its
    relaxation is 251.81, the optimum, and answers in 30 ms where branch and bound took 200 ms."""
    import highspy

    began = time.perf_counter()
    h = _highs(p, seconds, relax=True)
    h.run()  # in this thread: a relaxation takes milliseconds, and the solver thread added half to them
    if h.getModelStatus() != highspy.HighsModelStatus.kOptimal:
        return None
    x = np.asarray(h.getSolution().col_value)
    bound = float(h.getInfo().objective_function_value)
    ints = p.is_int
    rounded = np.round(x[ints])
    if np.all(np.abs(x[ints] - rounded) <= INTEGRAL_TOL):
        x = x.copy()
        x[ints] = rounded
        return Solution(x, float(p.cost @ x), bound, True, f"{RELAXATION_STATUS} integral)",
                        0.0 if start is not None else time.perf_counter() - began)
    if start is not None:
        paid = float(p.cost @ start)
        if paid - bound <= REL_GAP * max(abs(paid), 1.0):
            return Solution(np.asarray(start, dtype=float), paid, bound, True, f"{RELAXATION_STATUS} met by the start)",
                            0.0)
    return None


def _highs(p: Program, seconds: float, relax: bool = False) -> Any:
    """A HiGHS instance holding ``p`` (``relax``: its linear relaxation, solved by the simplex
    without presolve), silent, on one thread."""
    import highspy

    with _stdout_silenced():  # highspy's wrapper prints a banner from C++ when it is built
        h = highspy.Highs()
    h.setOptionValue("output_flag", False)
    h.setOptionValue("time_limit", max(seconds, 0.01))
    h.setOptionValue("threads", 1)
    if relax:
        h.setOptionValue("presolve", "off")
        h.setOptionValue("solver", "simplex")
    lp = highspy.HighsLp()
    csc = p.matrix.tocsc()
    lp.num_col_, lp.num_row_ = p.cost.size, p.matrix.shape[0]
    lp.col_cost_, lp.col_lower_, lp.col_upper_ = p.cost, p.fixed.astype(float), p.ub
    lp.row_lower_, lp.row_upper_ = p.lower, p.upper
    lp.a_matrix_.format_ = highspy.MatrixFormat.kColwise
    lp.a_matrix_.start_, lp.a_matrix_.index_, lp.a_matrix_.value_ = csc.indptr, csc.indices, csc.data
    if not relax:
        lp.integrality_ = [highspy.HighsVarType.kInteger if k else highspy.HighsVarType.kContinuous for k in p.is_int]
    h.passModel(lp)
    return h


def _agrees(p: Program, sol: Solution) -> bool:
    """Whether ``sol``'s values cost its objective (to HiGHS's feasibility tolerance, relatively)."""
    return abs(float(p.cost @ sol.x) - sol.objective) <= 1e-6 * max(1.0, abs(sol.objective))


def _highs_run(p: Program, seconds: float, start: np.ndarray | None, nodes: int | None) -> Solution:
    import highspy

    h = _highs(p, seconds)
    h.setOptionValue("mip_rel_gap", REL_GAP)
    if nodes is not None:
        h.setOptionValue("mip_max_nodes", max(int(nodes), 0))
    if start is not None:  # the start is the incumbent to beat: proving it, not finding others, is the work
        for name in START_HEURISTICS_OFF:
            h.setOptionValue(name, False)
    began = time.perf_counter()
    first: list[float] = []
    if start is not None:
        sol = highspy.HighsSolution()
        sol.col_value = list(start)
        sol.value_valid = True
        h.setSolution(sol)
    h.cbMipImprovingSolution.subscribe(lambda *_: first or first.append(time.perf_counter() - began))
    _run_interruptible(h)
    status = h.getModelStatus()
    info = h.getInfo()
    solved = h.getSolution()
    has_x = info.primal_solution_status == 2  # kSolutionStatusFeasible
    x = np.asarray(solved.col_value) if has_x else None
    optimal = status == highspy.HighsModelStatus.kOptimal
    return Solution(x, float(info.objective_function_value) if has_x else float("inf"),
                    float(info.mip_dual_bound), optimal, h.modelStatusToString(status),
                    0.0 if start is not None else (first[0] if first else None),
                    status == highspy.HighsModelStatus.kTimeLimit, int(info.mip_node_count))


def solve_scipy(p: Program, seconds: float, start: np.ndarray | None, nodes: int | None = None) -> Solution:
    """HiGHS through ``scipy.optimize.milp``, which takes no starting solution."""
    from scipy.optimize import Bounds, LinearConstraint, milp
    from scipy.sparse import csr_matrix

    began = time.perf_counter()
    matrix = csr_matrix((p.matrix.data, p.matrix.indices, p.matrix.indptr), shape=p.matrix.shape)
    res = milp(p.cost, constraints=LinearConstraint(matrix, p.lower, p.upper), integrality=p.is_int.astype(int),
               bounds=Bounds(p.fixed.astype(float), p.ub),
               options={"time_limit": max(seconds, 0.01), "disp": False, "mip_rel_gap": REL_GAP}
               | ({} if nodes is None else {"node_limit": max(int(nodes), 0)}))
    elapsed = time.perf_counter() - began
    bound = float(getattr(res, "mip_dual_bound", np.nan) or np.nan)
    return Solution(res.x, float(res.fun) if res.x is not None else float("inf"), bound, res.status == 0,
                    res.message, elapsed if res.x is not None else None, "time limit" in str(res.message).lower(),
                    int(getattr(res, "mip_node_count", 0) or 0))


def solve_scip(p: Program, seconds: float, start: np.ndarray | None, nodes: int | None = None) -> Solution:
    """SCIP through ``pyscipopt`` (an optional extra), warm-started from ``start``."""
    from pyscipopt import Model, quicksum

    m = Model()
    m.hideOutput()
    m.setParam("limits/time", max(seconds, 0.01))
    m.setParam("limits/gap", REL_GAP)
    if nodes is not None:
        m.setParam("limits/nodes", max(int(nodes), 0))
    xs = [m.addVar(vtype="I" if p.is_int[k] else "C", lb=float(p.fixed[k]), ub=float(p.ub[k]), obj=float(p.cost[k]))
          for k in range(p.cost.size)]
    for r, (lo, hi) in enumerate(zip(p.lower, p.upper)):
        a, b = p.matrix.indptr[r], p.matrix.indptr[r + 1]
        expr = quicksum(v * xs[k] for k, v in zip(p.matrix.indices[a:b], p.matrix.data[a:b]))
        if np.isfinite(lo):
            m.addCons(expr >= lo)
        if np.isfinite(hi):
            m.addCons(expr <= hi)
    if start is not None:
        sol = m.createSol()
        for v, val in zip(xs, start):
            m.setSolVal(sol, v, float(val))
        m.addSol(sol)
    m.optimize()
    sols = m.getSols()
    x = np.array([m.getVal(v) for v in xs]) if sols else None
    first = min((m.getSolTime(s) for s in sols), default=None) if start is None else 0.0
    proved = m.getStatus() in ("optimal", "gaplimit")  # gaplimit: within REL_GAP
    return Solution(x, m.getObjVal() if sols else float("inf"), m.getDualbound(), proved, m.getStatus(), first,
                    m.getStatus() == "timelimit")


CPSAT_STEPS = 1e7  # CP-SAT takes integer objectives: the dearest column's cost in this many steps


def solve_cpsat(p: Program, seconds: float, start: np.ndarray | None, nodes: int | None = None) -> Solution:
    """OR-Tools' CP-SAT (an optional extra) on costs scaled to integers, hinted with ``start``. It
    has no node count (``nodes`` is not used) and runs two workers: its answers are not reproducible.

    Costs are rounded *down*, so CP-SAT's bound stays a lower bound on the real costs (rounded to
    nearest, BERT's few hundred picked nodes could lift it by 1%); optimality is then judged on
    the real cost of its answer against that bound."""
    from ortools.sat.python import cp_model

    built = time.perf_counter()
    m = cp_model.CpModel()
    xs = [m.new_int_var(int(p.fixed[k]), int(p.ub[k]), f"x{k}") for k in range(p.cost.size)]  # levels: integral too
    for r, (lo, hi) in enumerate(zip(p.lower, p.upper)):
        a, b = p.matrix.indptr[r], p.matrix.indptr[r + 1]
        expr = sum(int(v) * xs[k] for k, v in zip(p.matrix.indices[a:b], p.matrix.data[a:b]))
        if np.isfinite(lo):
            m.add(expr >= int(np.ceil(lo)))
        if np.isfinite(hi):
            m.add(expr <= int(np.floor(hi)))
    scale = CPSAT_STEPS / max(float(np.max(np.abs(p.cost), initial=0.0)), 1e-12)
    m.minimize(sum(int(np.floor(c * scale)) * x for c, x in zip(p.cost, xs)))
    if start is not None:
        for x, val in zip(xs, start):
            m.add_hint(x, int(round(val)))
    solver = cp_model.CpSolver()
    solver.parameters.max_time_in_seconds = max(seconds - (time.perf_counter() - built), 0.01)  # building counts
    solver.parameters.num_workers = 2
    solver.parameters.relative_gap_limit = REL_GAP
    began = time.perf_counter()
    first: list[float] = []

    class _First(cp_model.CpSolverSolutionCallback):
        def on_solution_callback(self) -> None:
            if not first:
                first.append(time.perf_counter() - began)

    status = solver.solve(m, _First())
    found = status in (cp_model.OPTIMAL, cp_model.FEASIBLE)
    x = np.array([solver.value(v) for v in xs], dtype=float) if found else None
    objective = float(p.cost @ x) if x is not None else float("inf")
    bound = solver.best_objective_bound / scale
    optimal = found and objective - bound <= REL_GAP * max(abs(objective), 1e-12)
    return Solution(x, objective, bound, optimal, solver.status_name(status), first[0] if first else None,
                    not optimal)  # only its clock stops it short of a proof


@dataclass(frozen=True)
class SolverRow:
    name: str
    package: str  # the import that must succeed
    takes_start: bool
    solve: Callable[[Program, float, np.ndarray | None, int | None], Solution]  # program, seconds, start, nodes
    module: str = ""  # what its solve imports, when not ``package`` itself


EXTRACTION_MODULES: tuple[str, ...] = ()  # what every exact extraction imports besides its solver: nothing
# (its parts and cycle components are walks of its own; networkx only where an answer has a cycle,
# scipy only for the largest e-graphs: cycles.py)


def solver_modules(name: str) -> tuple[str, ...]:
    """The modules an exact extraction with solver ``name`` imports: a caller with idle time (the
    parent while its worker saturates) loads these and no others (``scipy.optimize`` alone took
    0.24 s, and HiGHS's own binding does not need it)."""
    row = SOLVERS.get(name)
    return EXTRACTION_MODULES + ((row.module or row.package,) if row is not None else ())


SOLVERS: dict[str, SolverRow] = {r.name: r for r in (
    SolverRow("highs", "highspy", True, solve_highs),
    SolverRow("scipy", "scipy", False, solve_scipy, "scipy.optimize"),
    SolverRow("scip", "pyscipopt", True, solve_scip),
    SolverRow("cpsat", "ortools", True, solve_cpsat),
)}
DEFAULT_SOLVER = "highs"


def available(name: str) -> bool:
    """Whether solver ``name``'s package imports here."""
    import importlib.util

    return importlib.util.find_spec(SOLVERS[name].package) is not None


def get_solver(name: str) -> SolverRow:
    if name not in SOLVERS:
        raise ValueError(f"unknown ILP solver {name!r}; choose one of {', '.join(SOLVERS)}")
    if not available(name):
        raise ValueError(f"ILP solver {name!r} needs the package {SOLVERS[name].package!r} (pip install it)")
    return SOLVERS[name]
