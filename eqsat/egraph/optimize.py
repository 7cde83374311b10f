"""``optimize(graph, rules, cost, limits)``: TENSAT-style equality saturation on egglog."""
from __future__ import annotations

import contextlib
import gc
import math
import multiprocessing
import os
import signal
import threading
import time
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from eqsat.cost.devices import DEFAULT_DEVICE, Device
from eqsat.cost.registry import cost_model
from eqsat.cost.roofline import CostModel
from eqsat.egraph.extract import EGraphView, gc_paused, node_costs, read_egraph, to_graph
from eqsat.egraph.judging import MergeJudge, Optimum, Speculation, filtered_optimum, final_extraction, job_bytes, judged
from eqsat.egraph.language import alternative_let
from eqsat.egraph.limits import Iteration, Limits, RunReport, growth
from eqsat.egraph.part_helper import ParentEnd, WorkerHelper, solve_one
from eqsat.egraph.preload import preload, preload_key, remember
from eqsat.egraph.process import PARENT_POLL_S, die_with_parent, import_all, start_method
from eqsat.egraph.relevance import relevant_compiled
from eqsat.egraph.rewrites import COMPILED, Compiled
from eqsat.egraph.serialize import write_json as write_egraph_json
from eqsat.egraph.solvers import DEFAULT_SOLVER, RELAXATIONS, solver_modules
from eqsat.egraph.view import reached_classes
from eqsat.egraph.work import EGraphWork
from eqsat.errors import EqsatError
from eqsat.graph_rewrite import RewritesUsed, offered
from eqsat.guards import Kept
from eqsat.ir.graph import Graph, Node
from eqsat.rules.rulefile import Rule
from eqsat.rules.rulesets import DEFAULT_RULE_SETS
from eqsat.search import SearchResult


def _saturate(rules: Compiled, graph: Graph, limits: Limits, on_iteration: Any = None,
              optimum: Optimum | None = None, alternatives: Sequence[Graph] = ()
              ) -> tuple[EGraphView, list[str], RunReport, float]:
    from eqsat.egraph.runner import EGraphRunner  # egglog: only where the e-graph lives

    runner = EGraphRunner(rules, memory_gb=limits.memory_gb)
    roots = runner.insert(graph, alternatives)
    t0 = time.perf_counter()
    judge = None if optimum is None else (lambda: judged(runner, optimum, roots))
    loaded_s = runner.report.load_s
    report = runner.run(limits, on_iteration, judge)
    return final_view(runner, report), roots, report, saturation_s(t0, loaded_s, report)


def saturation_s(t0: float, loaded_s: float, report: RunReport) -> float:
    """The seconds since ``t0`` less the rules loaded meanwhile as the run woke them (``report``'s
    loading past ``loaded_s``): those count as loading, not saturation."""
    return time.perf_counter() - t0 - (report.load_s - loaded_s)


def final_view(runner: Any, report: RunReport) -> EGraphView | None:
    """The e-graph as plain data, or None when a judge already saw it as it is (the caller keeps
    what each judge saw; reading and sending a large e-graph again is not free)."""
    return None if report.final_judged is not None else read_egraph(runner.egraph, runner.lang)


TIME_SLACK = 0.02  # the worker is killed this fraction past the time limit (stopping it takes ~0.05 s more)
REPLAY_SHARE = 0.05  # a graph whose insertion takes this share of the time limit is snapshotted as inserted

def _worker(conn: Any, parent: int | None = None) -> None:
    """The saturation process: import everything, then run jobs as they come (one warm process
    serves every model of a run; a small graph's run keeps its rules loaded in a host for later
    ones, see :class:`~eqsat.egraph.host.HostPool`). After an iteration that leaves
    too little time for another like it, it sends a snapshot of the e-graph, so a kill during the
    next one loses nothing already done; a graph whose insertion took :data:`REPLAY_SHARE` of the
    time limit is snapshotted as inserted, before the clock starts, and after every iteration
    (a replay of it would overrun the limit). It exits when its parent does
    (:func:`die_with_parent`), and ignores Ctrl-C: the parent, which gets it too, stops it and
    reports once."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    parent = os.getppid() if parent is None else parent
    die_with_parent(parent)
    from eqsat.egraph.host import HostPool  # egglog loads now, while the parent prepares the first job

    hosts = HostPool()  # small graphs' rules stay loaded for later jobs that need them
    import_all(("eqsat.egraph.runner",))  # now, not in the first job (5 ms)
    while True:
        if not conn.poll(0):  # nothing waits: the next host's e-graph now (a job makes its own)
            hosts.prepare()
        try:
            while not conn.poll(PARENT_POLL_S):
                if os.getppid() != parent:
                    return
            message = conn.recv()
        except (EOFError, OSError):  # the parent is gone, or gave up before sending a job
            return
        if message[0] == "ready":  # the parent waits until this process can take a job
            conn.send(("ready",))
            continue
        if message[0] == "solve":  # a part of the parent's exact extraction
            solve_one(conn, *message[1:])
            continue
        if message[0] in ("solved", "error"):  # a late answer to a part a judge here stopped waiting for
            continue
        if message[0] == "preload":  # the rules of the parent's next job, while it parses them
            with contextlib.suppress(Exception):  # a stale record costs the loading, no more
                preload(message[1], hosts, lambda: conn.poll(0))  # until the job comes
            continue
        rules, graph, limits, alternatives, key, merge_judge = message
        host = hosts.pick(rules, len(graph.nodes()), key)  # None: a large graph, its own e-graph (see HostPool)
        with gc_paused():  # a job allocates no reference cycles to speak of (see gc_paused)
            ok = _run_job(conn, rules, graph, limits, host, alternatives, key, merge_judge)
        message = merge_judge = None  # the judge holds every e-graph it saw: not kept while this process waits
        if not ok:
            hosts.drop(host)  # a failed job may leave it in any state


def _run_job(conn: Any, rules: Compiled, graph: Graph, limits: Limits, host: Any = None,
             alternatives: Sequence[Graph] = (), key: str | None = None,
             merge_judge: MergeJudge | None = None) -> bool:
    """Run one job, sending its progress and result; whether it ended cleanly (``host`` back as it was).
    Merges by need are judged by ``merge_judge`` here, or else by the parent, asked. With a ``host``
    and a ``key``, what the run leaves there is recorded under ``key`` (see
    :mod:`eqsat.egraph.preload`) as soon as the answer is sent: the parent may exit before the
    host is put back (ResNeXt-50's did)."""
    from eqsat.egraph.runner import EGraphRunner

    try:
        start = time.perf_counter()
        runner = EGraphRunner(rules, host=host, memory_gb=limits.memory_gb)
        roots = runner.insert(graph, alternatives)
        setup_s = time.perf_counter() - start  # what a replay in the parent would repeat before any iteration
        t0 = time.perf_counter()
        size = [runner.size()]

        def snapshot() -> None:
            report = replace(runner.report, iterations=list(runner.report.iterations))
            if not report.iterations:
                report.final_enodes = runner.size()
            conn.send(("snapshot", (read_egraph(runner.egraph, runner.lang), roots, report,
                                    time.perf_counter() - t0)))

        # a graph whose insertion alone is a share of the time limit: a replay would overrun it, so
        # the e-graph as inserted is the first snapshot (before the clock starts), and every
        # iteration leaves one
        risky = [setup_s > limits.seconds * REPLAY_SHARE]
        if risky[0]:
            runner.analyse()
            snapshot()
        conn.send(("started", (setup_s, runner.report.load_s, runner.report.insert_s)))
        loaded_s = runner.report.load_s  # see saturation_s
        t0 = time.perf_counter()

        def on_iteration(it: Iteration) -> None:
            grew, size[0] = growth(size[0], it.enodes), it.enodes  # the runner's own forecast
            elapsed = time.perf_counter() - t0
            forecast = elapsed + it.seconds * grew * grew
            risky[0] = risky[0] or forecast > limits.seconds or elapsed > limits.seconds / 2
            if risky[0]:  # from the first risky iteration on, every one leaves a snapshot, sent first
                snapshot()
            conn.send(("iteration", it))

        def ask_parent(view: EGraphView, lets: list[str]) -> tuple[float, Graph, list[Any]]:
            conn.send(("judge", (view, lets)))  # the parent extracts; this process waits
            import_all(("highspy",))  # for the parts (part_helper): now, while it waits
            while True:  # it solves the judge's parts it is sent until the answer comes
                message = conn.recv()
                if message[0] != "solve":
                    return message
                solve_one(conn, *message[1:])

        if merge_judge is not None:
            # the judges' solver binding imports beside the saturation (a first job's, 20 ms)
            threading.Thread(target=import_all, args=(solver_modules(limits.ilp_solver),), daemon=True).start()
            RELAXATIONS.reset()  # this model's judges decide whether relaxations are worth trying
            parent_end = ParentEnd(conn)
            merge_judge.helper = lambda: WorkerHelper(parent_end, limits.ilp_solver)

        def judge() -> tuple[float, Graph, dict[Node, str]]:
            return judged(runner, ask_parent if merge_judge is None else merge_judge, roots)

        ahead = merge_judge and (lambda i: merge_judge.before_last_round(runner.report, i, roots, conn.send))
        report = runner.run(limits, on_iteration, judge, ahead)  # the parent proves while the last round runs
        saturated_s = saturation_s(t0, loaded_s, report)
        back = None if merge_judge is None else merge_judge.sent_back(  # the final e-graph proved first
            report, roots, WorkerHelper(parent_end, limits.ilp_solver), conn.send)
        conn.send(("done", (final_view(runner, report), roots, report, saturated_s, back)))
        if host is not None and key is not None:
            with contextlib.suppress(Exception):  # after the answer nothing may reach the parent: a
                remember(key, rules.declarations, *runner.run_rules.left())  # record that fails is none
    except EqsatError as exc:  # the input's fault (a memory cap while loading): the parent raises it as it is
        conn.send(("user error", exc))
        return False
    except BaseException as exc:  # report, never hang the parent
        conn.send(("error", f"{type(exc).__name__}: {exc}"))
        return False
    try:
        runner.release()  # while the parent extracts
    except Exception:  # the answer is sent: nothing more goes to the parent, and the host is dropped
        return False
    return True


class SaturationWorker:
    """A child process (see :func:`start_method`) that starts, and imports egglog, while this
    process loads the model and selects and compiles the rules; it then saturates jobs
    under a hard deadline each. :meth:`shared` keeps one warm for the whole process, so a run over
    many models pays its start-up once; a worker killed at a deadline is replaced."""

    _shared: SaturationWorker | None = None

    @classmethod
    def shared(cls) -> SaturationWorker:
        """The process's warm worker, started on first use (or after the last one was killed)."""
        if cls._shared is None or not cls._shared.alive:
            cls._shared = cls()
        return cls._shared

    @property
    def alive(self) -> bool:
        return self.proc.is_alive() and not self.conn.closed

    def __init__(self) -> None:
        ctx = multiprocessing.get_context(start_method())
        self.conn, child = ctx.Pipe(duplex=True)
        self.proc = ctx.Process(target=_worker, args=(child, os.getpid()), daemon=True)
        with warnings.catch_warnings():  # Python >= 3.12 warns of BLAS's idle pool thread; see start_method
            warnings.simplefilter("ignore", DeprecationWarning)
            gc.freeze()  # collections, in the child and here, leave the pages the two share unwritten
            # the solver's binding, which this process imports for its extractions anyway: a forked
            # worker has it for its merge judges (imported in the job, it held a first run's 20 ms)
            import_all(solver_modules(DEFAULT_SOLVER))
            try:
                self.proc.start()
            finally:
                gc.unfreeze()
        child.close()
        self.prepared: tuple[Graph, str] | None = None  # the graph :meth:`prepare` was told of, its key

    def ready(self, timeout: float = 60.0) -> bool:
        """Wait until the worker has imported egglog and can take a job; False (and the worker
        closed) if it cannot say so in ``timeout`` seconds. An experiment that times each search
        waits here once, so its first cell does not pay the worker's start-up (BERT's in
        ``compare``: 0.40 s against 0.20 s for the same search warm)."""
        try:
            self.conn.send(("ready",))
            if self.conn.poll(timeout) and self.conn.recv() == ("ready",):
                return True
        except (EOFError, OSError):
            pass
        self.close()
        return False

    def prepare(self, graph: Graph, multi: bool) -> None:
        """Have the worker load the rules that ``graph``'s last run left in its host (see
        :mod:`eqsat.egraph.preload`) while this process parses and compiles them."""
        self.prepared = (graph, preload_key(graph, multi))
        with contextlib.suppress(OSError):  # a worker gone since: the job finds out and starts another
            self.conn.send(("preload", self.prepared[1]))

    def saturate(self, rules: Compiled, graph: Graph, limits: Limits, grace_s: float = 90.0,
                 optimum: Optimum | None = None, alternatives: Sequence[Graph] = ()
                 ) -> tuple[EGraphView, list[str], RunReport, float]:
        """Saturate in the worker, which is killed ``TIME_SLACK`` past ``limits.seconds`` after it
        has loaded the rules (loading may take up to ``grace_s``); ``alternatives`` as
        :meth:`EGraphRunner.insert` takes them. ``optimum`` judges merges by need: a
        :class:`~eqsat.egraph.judging.MergeJudge` that pickles goes with the job and judges in the
        worker (this process solving half its parts, and adopting what it saw of the final
        e-graph), any other judges here when the worker asks, and proves the e-graph the last merge
        round starts from while that round runs (:class:`~eqsat.egraph.judging.Speculation`).

        egglog cannot interrupt an iteration, so one exploding iteration could run (and grow)
        without bound. On a kill the result is the worker's last snapshot (see :func:`_worker`)
        or, without one, the run replayed here with only the iterations the worker finished in
        time, which is deterministic (none finished: the input graph alone); the report says so.
        Where a replay would be the answer, the worker is killed that much earlier (the setup and
        the iterations it would redo, as they took in the worker), so the answer is ready by the
        hard limit: a replay after the kill took as long again (a 60,000-node chain's first
        iteration, killed at 5.1 s for ``--seconds 5``: 15 s of saturation)."""
        finished: list[Any] = []
        snapshot = None
        speculation: Speculation | None = None  # the proof of the e-graph the last merge round starts from
        began = time.perf_counter()
        deadline = began + limits.seconds + grace_s
        started, setup_s, last_at, setup = False, 0.0, began, (0.0, 0.0)

        def replay_s() -> float:
            """What answering now costs here beyond the kill: nothing with a snapshot of every
            finished iteration, else the replay of the setup and the finished iterations."""
            if snapshot is not None and len(snapshot[2].iterations) >= len(finished):
                return 0.0
            return setup_s + last_at - began if started else 0.0

        # the extractor's modules load while this process would only wait for the worker
        threading.Thread(target=import_all, args=(solver_modules(limits.ilp_solver),), daemon=True).start()
        try:
            key = self.prepared[1] if self.prepared is not None and self.prepared[0] is graph else None
            self.conn.send_bytes(job_bytes((rules, graph, replace(limits, graph_rewrites=()), tuple(alternatives),
                                             key), optimum))
            while True:
                # killed early enough that the answer (a replay, where no snapshot holds the last
                # iteration) is ready by the hard time limit
                left = (deadline - replay_s() if started else deadline) - time.perf_counter()
                if left <= 0 or not self.conn.poll(left):
                    break
                message = self.conn.recv()
                kind, payload = message[0], message[-1]
                if kind == "solve":  # a part of the worker's merge judge (see part_helper.ParentEnd)
                    solve_one(self.conn, *message[1:])
                elif kind == "started":
                    began = last_at = time.perf_counter()
                    started, (setup_s, *setup) = True, payload
                    deadline = began + limits.seconds * (1 + TIME_SLACK)
                elif kind == "iteration":
                    finished.append(payload)
                    last_at = time.perf_counter()
                elif kind == "snapshot":
                    snapshot = payload
                elif kind == "judge":  # merges by need: the exact optimum of the e-graph so far
                    self.conn.send(optimum(*payload) if optimum is not None else (math.inf, graph, []))
                elif kind == "proving":  # the worker proves the final e-graph: its seconds, not the saturation's
                    deadline = max(deadline, time.perf_counter() + payload)
                elif kind == "speculate":  # proved while the last merge round runs, done by the hard limit
                    speculation = Speculation.run(*payload, optimum.limits, deadline - replay_s())
                elif kind == "done":  # the worker waits for the next job
                    view, roots, report, saturate_s, back = payload
                    if back is not None:  # it judged the merges itself
                        optimum.adopt(report, back, speculation)
                        speculation = None
                    return view, roots, report, saturate_s
                elif kind == "user error":
                    raise payload
                else:
                    raise RuntimeError(f"saturation failed in the child process: {payload}")
        except (EOFError, OSError):  # it died, or a judge's part helper gave up on it and closed it
            pass
        except BaseException:
            self.close()
            raise
        finally:
            if speculation is not None:  # no answer came to use it for
                speculation.undo()
        self.close()  # killed at the deadline (or it died): the next job gets a new worker
        # the last snapshot, unless it misses finished iterations that a replay can still redo in time
        if snapshot is not None and (replay_s() == 0.0 or deadline - time.perf_counter() < replay_s()):
            view, roots, report, _ = snapshot
            overran = max(len(finished), len(report.iterations))  # a snapshot is sent before its iteration's news
            report.stop = (f"hard time limit (iteration {overran} overran; kept the e-graph after "
                           f"{len(report.iterations)} iterations)")
            report.clock = "the saturation's hard time limit"
            return view, roots, report, time.perf_counter() - began
        replay = replace(limits, iterations=len(finished))
        view, roots, report, _ = _saturate(rules, graph, replay, optimum=optimum, alternatives=alternatives)
        report.load_s, report.insert_s = setup  # the worker's: the replay's own are in the seconds returned
        report.stop = f"hard time limit (iteration {len(finished)} overran; replayed {replay.iterations})"
        report.clock = "the saturation's hard time limit"
        return view, roots, report, time.perf_counter() - began

    def close(self) -> None:
        if self.proc.is_alive():
            self.proc.kill()
        self.proc.join()
        self.conn.close()
        if SaturationWorker._shared is self:
            SaturationWorker._shared = None


def optimize(graph: Graph, rules: Sequence[Rule], cost: str | Device | CostModel = DEFAULT_DEVICE,
             limits: Limits | None = None, isolate: bool = True, hard_grace_s: float = 90.0,
             rewrite_constants: bool = False) -> SearchResult:
    """Saturate ``graph`` with ``rules`` under ``limits`` and extract the cheapest graph by ``cost``
    (unverified: see :func:`eqsat.search.run_verified`).

    With ``isolate`` the saturation runs in a child process with a hard timeout (see
    :class:`SaturationWorker`); ``rewrite_constants`` also rewrites weight-only subgraphs (off, as
    in the α search)."""
    with gc_paused():  # no cyclic collections walking the heap between a run's many small objects
        return _optimize(graph, rules, cost, limits, isolate, hard_grace_s, rewrite_constants)


def _optimize(graph: Graph, rules: Sequence[Rule], cost: str | Device | CostModel, limits: Limits | None,
              isolate: bool, hard_grace_s: float, rewrite_constants: bool) -> SearchResult:
    limits = limits if limits is not None else Limits()
    model = cost_model(cost)
    original = model.graph_time_us(graph)
    start = time.perf_counter()
    worker = SaturationWorker.shared() if isolate else None  # a new one starts up while the rules are compiled
    RELAXATIONS.reset()  # this model's programs decide whether relaxations are worth trying
    compiled = relevant_compiled(rules, graph, multi=limits.k_multi > 0, rewrite_constants=rewrite_constants)
    COMPILED.save()  # a later process compiles nothing it has seen
    compile_s = time.perf_counter() - start
    leaves = {n.attr("name"): n for n in graph.leaves()}
    alternatives = offered(limits.graph_rewrites, graph)  # verified by their rewrite before they enter
    pairs = [Graph((a.node, a.replacement, a.mark), graph.dtype, graph.name) for a in alternatives]
    marks = [alternative_let(k, pair.nodes().index(a.mark)) for k, (a, pair) in enumerate(zip(alternatives, pairs))]
    rewrite_s = time.perf_counter() - start - compile_s

    judge = MergeJudge(model, graph, replace(limits, graph_rewrites=()))  # sent to the worker with the job
    if worker is not None:  # where it cannot be sent, it judges here, with the worker waiting as its part helper
        judge.helper = lambda: WorkerHelper(worker, limits.ilp_solver)
        view, roots_let, report, saturate_s = worker.saturate(compiled, graph, limits, hard_grace_s, judge, pairs)
    else:
        view, roots_let, report, saturate_s = _saturate(compiled, graph, limits, optimum=judge, alternatives=pairs)
    t1 = time.perf_counter()
    settled, filtered, costs, greedy = None, False, None, None
    hint = judge.hint
    if report.final_judged is not None:
        seen_view, found, found_graph, seen_costs = judge.final(report)
        view = view if view is not None else seen_view
        settled = found if found.exact else None
        # the judge's answer is the cycle filter's optimum of this very e-graph: the proof starts there
        filtered = view is seen_view and filtered_optimum(found)
        hint[:] = [found_graph] if filtered else hint
        settled = found if filtered and limits.ilp_nodes == 0 else settled  # no proof asked for: the filter's answer
        if settled is None and filtered:  # proved already (ahead here, or by the worker), else None
            settled = judge.proved
        if view is seen_view:  # its prices and greedy choice (unless the clock hurried it) hold as they were
            costs, greedy = seen_costs, None if found.clock else found.greedy
    roots = [view.lets[r] for r in roots_let]
    costs = costs if costs is not None else node_costs(view, model, graph.dtype, judge.prices)
    if limits.dump_egraph:
        write_egraph_json(view, costs, roots, limits.dump_egraph)
    extraction = settled
    if extraction is None:
        helper = WorkerHelper(worker, limits.ilp_solver) if worker is not None else None  # solves half the parts
        extraction = final_extraction(view, costs, roots, limits, limits.ilp_seconds, hint[0] if hint else None,
                                      greedy, filtered, helper)
    choice, greedy_us = extraction.choice, extraction.greedy_cost
    method, gap, status = extraction.method, extraction.gap, extraction.status
    best = to_graph(view, choice, roots, leaves, graph)
    best_us = model.graph_time_us(best)
    kept = None
    if best_us >= original and best != graph:  # a rewrite that gains nothing (a free reshape removed) is a risk
        kept = Kept("extraction", "input kept: extraction was not better", original, best_us)
        best, best_us, method = graph, original, method + " (input kept: extraction was not better)"
    extract_s = time.perf_counter() - t1 + judge.proof_s  # the worker's proof, if it made one, came after the run
    reached = reached_classes(view, choice, roots) if best is not graph else set()
    now, was = (set(best.nodes()), set(graph.nodes())) if best is not graph else (set(), set())
    # an alternative that is a node the input has (an identity's other operand): taken where its node went
    taken = [a for a, let in zip(alternatives, marks)
             if (a.node not in now if a.mark in was else view.lets.get(let) in reached)]
    work = EGraphWork(limits, report, len(view.classes), greedy_us, method, gap, status,
                      RewritesUsed.of(alternatives, graph, taken, model))
    timings = {"compile": compile_s, "load": report.load_s, "insert": report.insert_s, "saturate": saturate_s,
               "extract": extract_s}
    if alternatives:
        timings["graph_rewrites"] = rewrite_s
    clock = "; ".join(dict.fromkeys(c for c in (report.clock, *judge.clocks, extraction.clock) if c))
    return SearchResult("eqsat", graph.name, model.name, original, best_us, best, time.perf_counter() - start,
                        report.stop, work, timings, clock=clock, kept=kept)


class EGraphSearch:
    """Equality saturation on the :class:`eqsat.search.Search` interface. Presets: ``default``
    (TENSAT's limits, 15 iterations, 50,000 e-nodes, 120 s, multi-pattern rules in the first
    iteration and then again by need, see :class:`Limits`), ``tensat-paper`` (TENSAT's fixed
    setting: multi-pattern rules in the first iteration only), ``quick`` (a smoke test)."""

    name = "eqsat"
    default_rule_sets = DEFAULT_RULE_SETS  # minimized: saturation derives what minimization dropped
    presets: Mapping[str, Limits] = {
        "default": Limits(iterations=15, nodes=50_000, seconds=120.0, k_multi=1),
        "tensat-paper": Limits(iterations=15, nodes=50_000, seconds=120.0, k_multi=1, multi_by_need=0),
        "quick": Limits(iterations=3, nodes=5_000, seconds=20.0, k_multi=1),
    }
    default_preset = "default"

    def limits(self, preset: str, model: str = "") -> Limits:
        return self.presets[preset]

    def warm(self) -> None:
        SaturationWorker.shared()  # it spawns and imports egglog while the caller builds the graph

    def ready(self) -> None:
        """Wait until the worker :meth:`warm` started can take a job (see :meth:`SaturationWorker.ready`)."""
        SaturationWorker.shared().ready()

    def prepare(self, graph: Graph, limits: Limits) -> None:
        """Start the fixed work for ``graph`` before the caller parses the rules: the worker loads
        the rules its last run needed (:mod:`eqsat.egraph.preload`) while this process imports
        what its extractions will (the solver's binding). A fresh worker
        imports egglog (0.04 s) before it can load a rule, so the parse and compile alone (0.03 s)
        left it time for a part: SqueezeNet's 37 rules took 0.04 s of its run's loading, ResNeXt-50's
        45 0.03 s, and none, loaded before the job came, 0.01 s."""
        SaturationWorker.shared().prepare(graph, limits.k_multi > 0)
        import_all(solver_modules(limits.ilp_solver))

    def run(self, graph: Graph, rules: Sequence[Rule], cost_model: CostModel, limits: Limits) -> SearchResult:
        return optimize(graph, rules, cost_model, limits)
