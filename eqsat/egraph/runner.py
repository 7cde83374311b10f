"""Driving egglog: insert a graph, run rule iterations under limits, report each iteration.

egglog's Python API has no node or time limit and cannot interrupt an iteration, so iterations are
driven from here: every iteration saturates the constness analysis, then runs the rewrite ruleset
once (and the multi-pattern ruleset in the first ``k_multi`` iterations), optionally under a
back-off scheduler that bans rules with too many matches in an iteration; the e-graph's size and
the clock are checked after it.

Caps hold inside an iteration too: the rules are loaded as ``BATCHES`` rulesets
(:mod:`eqsat.egraph.loading`), which together make ``rw`` (and ``multi``), so an iteration is
one simultaneous pass (egg's semantics) unless it would break a cap. An iteration that may
overshoot the node limit (a multi-pattern one, or one the last growth predicts past it) is run
after saving the e-graph (egglog's push); if it leaves more than ``nodes x (1 + NODE_SLACK)``
e-nodes it is undone (pop) and run again batch by batch, checking after each batch. An
iteration predicted to overrun the clock runs batch by batch from the start. Batches see each
other's results, so a stepped iteration is not the simultaneous pass: it happens only where a
cap stops the run anyway. Rules are sent to egglog one per call (parsing many in one program
costs memory superlinearly in 13.2), after the graph is inserted (see :meth:`_load_rules`), and
only once their triggers match (:mod:`eqsat.egraph.loading`). A :class:`RuleHost`'s e-graph
keeps the rules of earlier runs loaded; the worker keeps hosts for small graphs only
(:class:`~eqsat.egraph.host.HostPool`).
"""
from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from typing import Any

from eqsat.egraph.bindings import load_bindings
from eqsat.egraph.facts import Facts, fact_lines
from eqsat.egraph.host import RuleHost
from eqsat.egraph.language import NAMED, REF, alternative_prefix, egg_string, let_name, split_proj_attrs
from eqsat.egraph.limits import Iteration, Limits, RunReport, growth, over_memory
from eqsat.egraph.loading import RunRules
from eqsat.egraph.rewrites import Compiled, compile_rules
from eqsat.ir.graph import Graph, Node
from eqsat.rules.rulefile import Rule

CHUNK = 32  # lines per program sent to egglog (see EGraphRunner._send_lines)
NODE_SLACK = 0.10  # a batch that leaves more than nodes x (1 + NODE_SLACK) e-nodes is undone

egglog = load_bindings()


class EGraphRunner:
    """An egglog e-graph holding one tensor graph and the compiled rules."""

    def __init__(self, rules: Sequence[Rule] | Compiled, multi: bool = True, host: RuleHost | None = None,
                 memory_gb: float = math.inf, lazy: bool = True):
        """Declare the constructors of compiled rules (or compile ``rules``; ``multi=False`` drops
        multi-pattern ones) in a new e-graph, or in ``host``'s (:meth:`release` gives the host back
        as it was). The rules themselves are loaded once the graph is in (:meth:`_load_rules`),
        except into a host, which keeps them for later runs and loads them now. With ``lazy`` a rule
        is loaded only once its trigger matches (see :meth:`_wake`). Loading stops with
        :class:`MemoryLimitError` past ``memory_gb``."""
        compiled = rules if isinstance(rules, Compiled) else compile_rules(rules, multi=multi)
        self.lang = compiled.lang
        self.host = host  # None: this run owns its e-graph, and nothing is popped at the end
        self.own = host or RuleHost()
        self.egraph = self.own.egraph
        self.declared = self.own.lines  # the host's own declarations: a graph's constructor among them is not sent
        self.groups = compiled.groups
        self.multi_rules = len(compiled.multi_names)
        self.report = RunReport(
            rules_compiled=len(compiled.names),
            multi_compiled=len(compiled.multi_names),
            rules_skipped=compiled.skipped,
            egglog_rules=len(compiled.rules),
        )
        self.roots: list[str] = []
        self.depth = 0  # egglog push levels not popped
        self.marks = 0  # graphs marked chosen so far (their outputs need fresh names)
        self.refs = 0  # rows of the ref table sent so far (see _terms)
        self.inserted: dict[Node, str] = {}  # the inserted graph's references (see insert, mark_best)
        self.marked: dict[Node, str] = {}  # the nodes marked ``chosen`` so far, their references
        self.marked_depth = self.low = 0  # the last mark's push level; the lowest since (a pop below undoes it)
        self.term_table = False  # (term K) declared (see insert_terms)
        self._pending: tuple[Compiled, float] | None = (compiled, memory_gb)
        self.lazy = lazy
        self.run_rules: RunRules | None = None  # once loaded (see _load_rules)
        self._saved: list[tuple] = []  # the rules' state at each push (see _pop)
        if host is not None:
            self._load_rules(push=True)
        else:
            start = time.perf_counter()
            self.own.declare(compiled)
            self.report.load_s = time.perf_counter() - start

    def _load_rules(self, push: bool = False) -> None:
        """Load the rules (once; a rule the e-graph lacks sleeps until :meth:`_wake`) and name their
        rulesets (after a save, with ``push``: a host's run names them anew, popped by :meth:`release`).

        egglog plans a rule's query when the rule is loaded, ordering its joins by the sizes its
        tables have then (egglog#866). Loaded into an empty e-graph, one rule matching nothing on
        an 8,000-node chain took 9 s in a pass stepped batch by batch (0.006 s loaded after the
        graph; the 4,000-node chain: 2.3 s, quadratic), and the 30,000-node chain's first
        iteration took 35.6 s (5.4 s). So a run that owns its e-graph loads its rules after
        :meth:`insert` (or :meth:`insert_terms`) put the graph in, planned on the graph's own
        sizes. A plan can still go stale as the e-graph grows (egglog#926: a third iteration on
        the 4,000-node chain, 21 s); loading the rules again each iteration gained little there
        (16 s: a rule loaded anew matches the whole e-graph once), so the time limit's kill is
        what bounds it."""
        if self._pending is None:
            return
        compiled, memory_gb = self._pending
        self._pending = None
        start = time.perf_counter()
        self.run_rules = RunRules(self.own, compiled, memory_gb, keep=self.host is None, lazy=self.lazy)
        if push:
            self._send("(push)")  # this run's state, popped by release
        self._send_lines(self.run_rules.name_sets())
        self.report.load_s += time.perf_counter() - start

    def _wake(self, everything: bool = False) -> None:
        """Load the sleeping rules whose triggers match now, every one with ``everything`` (see
        :mod:`eqsat.egraph.loading`): the next pass matches what it would with every rule loaded."""
        if self.run_rules is None or not self.run_rules.asleep:
            return
        start = time.perf_counter()
        self._send_lines(self.run_rules.wake(self._send, everything))
        self.report.load_s += time.perf_counter() - start

    def _push(self) -> None:
        self._send("(push)")
        self.depth += 1
        self._saved.append(self.run_rules.save())  # a push comes in a run, after the rules loaded

    def _pop(self) -> None:
        """Undo back to the last save: the e-graph, and the rules woken since (egglog's pop takes
        them and their rulesets away)."""
        self._send("(pop)")
        self.depth -= 1
        self.low = min(self.low, self.depth)
        self.run_rules.restore(self._saved.pop())

    def _pop_to(self, depth: int) -> None:
        while self.depth > depth:
            self._pop()

    def release(self) -> None:
        """Give the host's e-graph back as it was before this run, with the rules the run woke
        loaded for later runs (they came after the run's save, so the pops took them away);
        no-op without a host."""
        if self.host is not None:  # a host's rules load in __init__
            woken = self.run_rules.woken
            self._pop_to(0)
            self._send("(pop)")
            self.host = None
            self.run_rules.keep_woken(woken)

    def _send(self, text: str) -> list[Any]:
        return self.egraph.run_program(*self.egraph.parse_program(text)) if text.strip() else []

    # ------------------------------------------------------------------ insertion
    def insert(self, graph: Graph, alternatives: Sequence[Graph] = ()) -> list[str]:
        """Add ``graph``, one row of the ``ref`` table per node (see :meth:`_terms`); returns the
        names of its outputs (:func:`let_name`, read back as :attr:`EGraphView.lets`). Each of
        ``alternatives`` is a graph whose first two outputs are a node of ``graph`` and what may
        replace it (a graph-level rewrite, :mod:`eqsat.graph_rewrite`): its new nodes are added
        (its outputs named by :func:`~eqsat.egraph.language.alternative_let`) and the two are made
        one e-class, so extraction may choose either and the rules apply to both."""
        start = time.perf_counter()
        refs, self.roots = self._terms(graph, "$n")
        self.inserted = refs  # each node's ``(ref K)``: a best graph marked later reuses those it shares
        unions = []
        for k, pair in enumerate(alternatives):
            known, _ = self._terms(pair, alternative_prefix(k), known=refs)
            a, b = (known[o] for o in pair.outputs[:2])
            unions.append(f"(union {a} {b})")
        self._send_lines(unions)
        self.report.insert_s += time.perf_counter() - start
        self._load_rules()  # planned on the graph's sizes (see _load_rules)
        return self.roots

    @staticmethod
    def named(name: str) -> str:
        """The egglog term of an output :meth:`insert` named ``name``."""
        return f"({NAMED} {egg_string(name)})"

    def _expr(self, n: Node, ref: dict[Node, str]) -> str | None:
        """The egglog term of ``n`` over its inputs' references (``(ref K)`` or ``(term K)``); None
        for a split, which lives only as its projections (``splitproj``)."""
        if n.is_leaf:
            return f"(leaf {egg_string(n.attr('name'))})"
        if n.op == "split":
            return None
        if n.op == "proj":
            sp = n.inputs[0]
            if sp.op != "split":
                raise ValueError(f"proj of {sp.op} is not supported in the e-graph")
            ctor = self.lang.ctor("splitproj", split_proj_attrs(sp.attr("axis"), n.attr("index")), 1,
                                  len(sp.attr("sizes")), len(n.shape))
            return f"({ctor.name} {ref[sp.inputs[0]]} {' '.join(map(str, sp.attr('sizes')))})"
        ctor = self.lang.ctor(n.op, n.attrs, len(n.inputs), rank=len(n.shape) if len(n.shapes) == 1 else None)
        return f"({ctor.name} {' '.join(ref[x] for x in n.inputs)})"

    def _terms(self, graph: Graph, prefix: str, facts: bool = True,
               known: dict[Node, str] | None = None) -> tuple[dict[Node, str], list[str]]:
        """Send ``graph``'s nodes as rows ``(ref K)`` of one table, K counting up over the run, with
        their shapes and constness unless ``facts`` is off (a graph extracted from this e-graph:
        every term is in it, with its facts, already); a term the e-graph holds already joins its
        e-class. Its outputs are also named, ``(named "N")`` with N its :func:`let_name` under
        ``prefix``. Nodes in ``known`` (a reference each) are not sent again. Returns each node's
        reference and the outputs' names.

        One ``let`` per node made a table per node in egglog, and every command (each program of
        an insert, every push, pop and iteration) costs time in the number of tables: a
        30,000-node chain took 49 s to insert and 0.8 s a push and pop. Two tables keep it linear."""
        refs: dict[Node, str] = dict(known or {})
        lines: list[str] = []
        index: dict[Node, int] = {}
        rows = Facts()  # sent as tables (see eqsat.egraph.facts)
        for i, n in enumerate(graph.nodes()):
            index[n] = i
            if n in refs:
                continue
            expr = self._expr(n, refs)
            if expr is None:
                continue
            refs[n] = f"({REF} {self.refs})"
            lines.append(f"(set {refs[n]} {expr})")
            if facts:
                rows.add(self.refs, n)
            self.refs += 1
        names = [let_name(prefix, index[o]) for o in graph.outputs]
        lines.extend(f"(set {self.named(name)} {refs[o]})" for name, o in zip(names, graph.outputs) if o in refs)
        self._send(self._undeclared(self.lang.take_pending()))
        self._send_lines(lines)
        rows.send(self._send)
        return refs, names

    def _undeclared(self, text: str) -> str:
        """``text`` less the lines the host declared for an earlier run's rules: a constructor this
        run's rules lack but its graph needs may be one another model's rules brought."""
        return "\n".join(line for line in text.splitlines() if line not in self.declared)

    def insert_terms(self, graph: Graph, chunk: int = 16, offset: int = 0) -> dict[Node, int]:
        """Add every node of ``graph`` as ``(term K)``, K its index plus ``offset`` (a later call's
        terms must not reuse an earlier call's indices); returns the indices. For many
        terms (the rule generator's buckets): each ``let`` of :meth:`insert` is a table of its own
        in egglog, and every command costs time in the number of tables, so many lets grow
        superlinearly, while one ``term`` table keeps it linear (and short programs keep it fast:
        see :meth:`_send_lines`)."""
        if not self.term_table:
            self._send("(function term (i64) T :merge old)")
            self.term_table = True
        ids: dict[Node, int] = {}
        ref: dict[Node, str] = {}
        lines: list[str] = []
        for n in graph.nodes():
            expr = self._expr(n, ref)
            if expr is None:
                continue
            k = ids[n] = offset + len(ids)
            ref[n] = f"(term {k})"
            lines.append(f"(set {ref[n]} {expr})")
            lines.extend(fact_lines(n, ref[n]))
        self._send(self._undeclared(self.lang.take_pending()))
        for k in range(0, len(lines), chunk):
            self._send("\n".join(lines[k : k + chunk]))
        self._load_rules()
        return ids

    def term_classes(self) -> dict[int, Any]:
        """``(term K)`` -> its e-class (an opaque value: equal for terms the e-graph made equal)."""
        frozen = self.egraph.freeze()
        fn = frozen.functions.get("term")
        return {} if fn is None else {self.egraph.value_to_i64(r.inputs[0]): r.output for r in fn.rows}

    def _send_lines(self, lines: Sequence[str]) -> None:
        """Commands in programs of :data:`CHUNK` lines: egglog 13.2 parses and runs a program in
        time superlinear in its length, so a long insert sent in short programs is several times
        faster than sent as one."""
        for k in range(0, len(lines), CHUNK):
            self._send("\n".join(lines[k : k + CHUNK]))

    def mark_best(self, graph: Graph, known: dict[Node, str] | None = None) -> None:
        """Mark the e-classes of ``graph`` (a graph extracted from this e-graph) ``chosen``. A node
        with a reference to its e-class (``known``, an earlier mark's, the inserted graph's) is not
        sent again, nor an e-class marked twice (``chosen`` is never cleared; a command costs 30-90 µs)."""
        self.marks += 1
        self.marked = self.marked if self.low >= self.marked_depth else {}  # a pop took back a mark
        before, known = self.size(), self.inserted | self.marked | (known or {})  # nodes with rows already
        refs, _ = self._terms(graph, f"$b{self.marks}_", facts=False, known=known)
        if self.size() != before:  # not all of it was in the e-graph: give the new terms their facts
            refs, _ = self._terms(graph, f"$b{self.marks}f_", known=known)
        done = set(self.marked.values())
        fresh = {n: refs[n] for n in graph.nodes() if not n.is_leaf and n in refs and refs[n] not in done}
        self._send_lines(list(dict.fromkeys(f"(chosen {ref})" for ref in fresh.values())))
        self.marked, self.marked_depth, self.low = self.marked | fresh, self.depth, self.depth

    # ------------------------------------------------------------------ running
    def equal(self, a: str, b: str) -> bool:
        """Whether two names (as :meth:`insert` returns them) are in one e-class."""
        try:
            self._send(f"(check (= {self.named(a)} {self.named(b)}))")
        except Exception:  # egglog reports a failed check as an error
            return False
        return True

    def analyse(self) -> None:
        """Run the constness analysis to saturation (:meth:`run` starts with it; the e-graph is
        then as a run of 0 iterations leaves it)."""
        self._send("(run-schedule (saturate (run analysis)))")

    def size(self) -> int:
        return sum(v for k, v in self.own.table_sizes().items() if k in self.lang.ctors or k == "leaf")

    def _schedule(self, sets: list[str], limits: Limits, analysis: bool = True) -> list[Any]:
        """Run ``sets`` (ruleset names) once, then (``analysis``) the constness analysis to saturation. The
        by-need merge sets (``best``) run under back-off at ``multi_match_limit`` (a rule matching more: banned)."""
        lets, runs = [], []
        if limits.match_limit is not None:
            lets.append(f"(let-scheduler bo (back-off :match-limit {limits.match_limit}))")
        if any(r.startswith("best") for r in sets):
            lets.append(f"(let-scheduler need (back-off :match-limit {limits.multi_match_limit}))")
        for r in sets:
            if r.startswith("best"):
                runs.append(f"(run-with need {r})")
            elif limits.match_limit is not None:  # a rule over the threshold is banned (back-off)
                runs.append(f"(run-with bo {r})")
            else:
                runs.append(f"(run {r})")
        then = " (saturate (run analysis))" if analysis else ""
        return self._send(f"(run-schedule {' '.join(lets + runs)}{then})")

    def _pass(self, kinds: list[str], limits: Limits) -> list[Any]:
        """One iteration: the rulesets of ``kinds`` in turn (a later one matches on what the earlier
        made), then the constness analysis. Rules asleep are woken before each kind's turn, so
        each sees what it would with every rule loaded."""
        rules = self.run_rules
        if not rules.asleep:
            return self._schedule([rules.sets[kind] for kind in kinds], limits)
        out: list[Any] = []
        for k, kind in enumerate(kinds):
            if k:
                self._wake()
            out += self._schedule([rules.sets[kind]], limits, analysis=k == len(kinds) - 1)
        return out

    def _batched(self, sets: list[str], limits: Limits, start: float) -> tuple[list[Any], str]:
        """One iteration batch by batch; returns its outputs and the cap that stopped or trimmed
        it ("" when every batch ran). The e-graph is saved (push) before each batch and restored
        (pop) when the batch leaves more than ``nodes x (1 + NODE_SLACK)`` e-nodes; the other
        batches still run, so the e-graph fills up to the cap with what fits."""
        out: list[Any] = []
        ceiling = limits.nodes * (1 + NODE_SLACK)
        cap = ""
        self._wake(everything=True)  # a batch may match what an earlier one made: every rule is loaded
        for kind in sets:
            lines, names = self.run_rules.batches(kind)
            self._send_lines(lines)
            for name in names:
                self._push()
                step = self._schedule([name], limits)
                enodes = self.size()
                if enodes > ceiling:
                    self._pop()  # this batch alone overshot: undo it, try the others
                    cap = "node limit"
                    continue
                out += step
                if enodes >= limits.nodes:
                    return out, "node limit"
                if time.perf_counter() - start > limits.seconds:
                    return out, "time limit"
                if over := over_memory(limits):
                    return out, over
        return out, cap

    def run(self, limits: Limits, on_iteration: Callable[[Iteration], None] | None = None,
            judge: Callable[[], tuple[float, Graph, dict[Node, str]]] | None = None,
            before_last_round: Callable[[int], None] | None = None) -> RunReport:
        """Run up to ``limits.iterations`` iterations; ``on_iteration`` hears about each one as it ends. Merges
        by need: when the rules saturate, ``judge`` gives the exact extracted cost of the e-graph, the graph
        that has it and a reference to some of its nodes' e-classes; while it improves (at most
        ``multi_by_need`` times), that graph's e-classes are marked ``chosen``, and one more multi-pattern
        iteration runs on pairs of marked ops only (TASO's step: merge two ops of the current best graph; a
        rule matching more than ``multi_match_limit`` times is still banned). The rewrite rules do not run in
        it (``round_rewrites`` runs them once after the merges): on the ten benchmark models they changed no
        best cost and only cost time. The round is judged right after that iteration: one whose optimum is no
        better, or that breaks a cap, ends the run and is discarded (the answer is the e-graph the judge before
        it saw; it is not popped, which would cost a copy of the e-graph for nothing); one that pays is
        followed at once by the next round on the graph it found. Merge rounds are TASO's greedy steps on top
        of the saturated e-graph, and the rewrite rules are not saturated again after them: on the ten
        benchmark models every round's gain showed in its merge iteration, and saturating after each round cost
        seconds on the large models for no better graph. ``before_last_round`` hears, before the last merge
        round allowed, the judge whose e-graph it starts from (the answer's, if that round does not pay)."""
        self._load_rules()  # no graph was inserted: the rules load into the e-graph as it is
        start = time.perf_counter()
        self.analyse()
        stop = "iteration limit"
        before = self.size()
        grew, last_s = 10.0, 0.0  # the first iteration's growth is a guess; it has no history
        by_need_left = limits.multi_by_need if judge is not None and self.multi_rules else 0
        best_cost, open_round, pending = math.inf, False, False  # open_round: a merge round not yet judged
        first_round = True  # no merge round has paid yet
        seen, base = None, None  # the judge that saw the e-graph as it is now; the one before a round
        judged_sizes: list[int] = []  # the e-graph's size at each judge (and below: the last one's references)
        known: dict[Node, str] = {}

        def judged() -> tuple[float, Graph]:
            nonlocal seen, known
            cost, graph, known = judge()
            seen, self.report.judges = self.report.judges, self.report.judges + 1
            judged_sizes.append(self.size())
            return cost, graph

        def next_round(best: Graph) -> None:  # the next merge round pairs best's ops, on the e-graph just judged
            nonlocal base, seen, open_round, pending, by_need_left
            base, seen = seen, None
            if by_need_left == 1 and before_last_round is not None:
                before_last_round(base)
            self.mark_best(best, known)
            open_round, pending, by_need_left = True, True, by_need_left - 1
        for i in range(limits.iterations):
            t0 = time.perf_counter()
            by_need, pending = pending, False
            multi = i < limits.k_multi or by_need
            if by_need:  # a merge round: the merges, and the rewrites after them only if asked
                sets = ["best", "rw"] if limits.round_rewrites else ["best"]
            else:
                sets = ["multi", "rw"] if multi else ["rw"]
            cap = ""
            self._wake()
            if t0 - start + last_s * grew * grew > limits.seconds:  # may overrun the clock: step
                out, cap = self._batched(sets, limits, start)  # batches see each other: another e-graph
                self.report.clock = self.report.clock or f"the saturation's time limit (iteration {i} stepped)"
            elif by_need:  # a merge round: one that overshoots is discarded whole
                out = self._pass(sets, limits)
                if self.size() > limits.nodes * (1 + NODE_SLACK):
                    cap = "node limit"
            elif multi or before * grew * grew > limits.nodes:  # may overshoot the node cap
                self._push()
                out = self._pass(sets, limits)
                if self.size() > limits.nodes * (1 + NODE_SLACK):
                    self._pop()  # it did: undo the pass and step up to the cap instead
                    out, cap = self._batched(sets, limits, start)
            else:
                out = self._pass(sets, limits)
            matches: dict[str, int] = {}
            updated = False
            for o in out:
                report = getattr(o, "report", None)
                if report is None:
                    continue
                updated = updated or report.updated
                for name, count in report.num_matches_per_rule.items():
                    for member in self.groups.get(name, (name,)):  # a shared query's matches are each member's
                        matches[member] = matches.get(member, 0) + count
            enodes = self.size()
            last_s = time.perf_counter() - t0
            grew, before = growth(before, enodes), enodes
            self.report.iterations.append(Iteration(i, enodes, last_s, matches, multi))
            if on_iteration is not None:
                on_iteration(self.report.iterations[-1])
            if cap:
                stop = cap
                if cap == "time limit":
                    self.report.clock = self.report.clock or "the saturation's time limit"
                break
            if enodes > limits.nodes:
                stop = "node limit"
                break
            if time.perf_counter() - start > limits.seconds:
                stop = "time limit"
                self.report.clock = self.report.clock or "the saturation's time limit"
                break
            if over := over_memory(limits):
                stop = over
                break
            if by_need:  # a merge round is judged at once: its gain shows in the iteration that merges
                # one that changed nothing holds the e-graph its base's judge saw: that optimum, not judged again
                cost, best = judged() if updated else (best_cost, None)
                if cost >= best_cost * (1 - 1e-9):  # it did not pay: discard it
                    open_round, self.report.undone, seen = False, True, base
                    stop = "saturated" if first_round else "saturated, then merged by need"
                    break
                best_cost, open_round, first_round = cost, False, False  # this round paid
                if by_need_left <= 0:  # the last round paid: its graph is the answer
                    stop = "saturated, then merged by need"
                    break
                next_round(best)
                continue
            if not updated and not (i + 1 < limits.k_multi):
                stop = "saturated"
                if by_need_left <= 0:
                    break
                cost, best = judged()  # merges by need: the best graph so far, whose ops the next round pairs
                best_cost = min(best_cost, cost)
                next_round(best)
        if open_round:  # the last merge round broke a cap before it was judged: discard it
            self.report.undone, seen = True, base
            if stop != "saturated":
                stop += " (the last by-need merge round was discarded)"
        self.report.final_enodes = judged_sizes[seen] if self.report.undone and seen is not None else self.size()
        self.report.egglog_rules_loaded = self.run_rules.loaded
        self.report.final_judged = seen  # marks (``chosen``) are no e-nodes: that judge's view still holds
        self.report.stop = stop
        return self.report
