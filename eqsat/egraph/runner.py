"""Driving egglog: insert a graph, run rule iterations under limits, report each iteration.

egglog's Python API has no node or time limit and cannot interrupt an
iteration, so iterations are driven from here: every iteration saturates the
constness analysis, then runs the rewrite ruleset once (and the multi-pattern
ruleset in the first ``k_multi`` iterations), optionally under a back-off
scheduler that bans rules with too many matches in an iteration, and the
e-graph's size and the clock are checked after it.

Caps hold inside an iteration too: the rules are loaded as :data:`BATCHES` rulesets, which
together make ``rw`` (and ``multi``), so an iteration is one simultaneous pass (egg's
semantics) unless it would break a cap. An iteration that may overshoot the node limit (a
multi-pattern one, or one the last growth predicts past it) is run after saving the e-graph
(egglog's push); if it leaves more than ``nodes x (1 + NODE_SLACK)`` e-nodes it is undone (pop)
and run again batch by batch, checking after each batch. An iteration predicted to overrun
the clock runs batch by batch from the start. Batches see each other's results, so a stepped
iteration is not the simultaneous pass: it happens only where a cap stops the run anyway.
Rules are sent to egglog one per call: parsing many rules in one program costs memory
superlinearly in 13.2. A warm worker runs its jobs in a :class:`RuleHost`'s e-graph, which keeps
the rules of earlier jobs loaded (see :class:`HostPool` for when that pays).
"""
from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from typing import Any

from eqsat.egraph.bindings import load_bindings
from eqsat.egraph.language import HEADER, alternative_prefix, egg_string, let_name, split_proj_attrs
from eqsat.egraph.limits import Iteration, Limits, MemoryLimitError, RunReport, growth, over_memory, rss_gb
from eqsat.egraph.rewrites import Compiled, compile_rules
from eqsat.ir.graph import Graph, Node
from eqsat.rules.rulefile import Rule

BATCHES = 16  # rulesets per rule kind: the granularity at which a cap can stop an iteration
KINDS = ("rw", "multi", "best")  # rewrites; multi-pattern merges; the same merges on the best graph's ops
CHUNK = 32  # lines per program sent to egglog (see EGraphRunner._send_lines)
NODE_SLACK = 0.10  # a batch that leaves more than nodes x (1 + NODE_SLACK) e-nodes is undone
MEMORY_EVERY = 16  # rules loaded between two checks of the memory cap

egglog = load_bindings()


class EGraphRunner:
    """An egglog e-graph holding one tensor graph and the compiled rules."""

    def __init__(self, rules: Sequence[Rule] | Compiled, multi: bool = True, host: RuleHost | None = None,
                 memory_gb: float = math.inf):
        """Load compiled rules (or compile ``rules``; ``multi=False`` drops multi-pattern ones) into a
        new e-graph, or into ``host``'s (rules it holds from earlier runs are not loaded again;
        :meth:`release` gives the host back as it was). Loading stops with :class:`MemoryLimitError`
        past ``memory_gb``."""
        compiled = rules if isinstance(rules, Compiled) else compile_rules(rules, multi=multi)
        self.lang = compiled.lang
        self.host = host  # None: this run owns its e-graph, and nothing is popped at the end
        start = time.perf_counter()
        own = host or RuleHost()
        self.egraph = own.egraph
        members = own.load(compiled, memory_gb)
        self.declared = own.lines  # the host's own declarations: a graph's constructor among them is not sent again
        if host is not None:
            self._send("(push)")  # this run's state, popped by release
        batches: dict[tuple[str, int], list[str]] = {}  # the rules' own rulesets, BATCHES per kind (see run)
        for k, (kind, name) in enumerate(members):
            batches.setdefault((kind, k % BATCHES), []).append(name)
        for kind in KINDS:
            for b in range(BATCHES):
                batch = " ".join(batches.get((kind, b), ()))
                self._send(f"(unstable-combined-ruleset {kind}_{b} {batch})" if batch else f"(ruleset {kind}_{b})")
            self._send(f"(unstable-combined-ruleset {kind} {' '.join(f'{kind}_{b}' for b in range(BATCHES))})")
        self.groups = compiled.groups
        self.multi_rules = len(compiled.multi_names)
        self.report = RunReport(
            load_s=time.perf_counter() - start,
            rules_compiled=len(compiled.names),
            multi_compiled=len(compiled.multi_names),
            rules_skipped=compiled.skipped,
            egglog_rules=len(compiled.rules),
        )
        self.roots: list[str] = []
        self.depth = 0  # egglog push levels not popped
        self.marks = 0  # graphs marked chosen so far (their lets need fresh names)
        self.term_table = False  # (term K) declared (see insert_terms)

    def _push(self) -> None:
        self._send("(push)")
        self.depth += 1

    def _pop(self) -> None:
        self._send("(pop)")
        self.depth -= 1

    def _pop_to(self, depth: int) -> None:
        while self.depth > depth:
            self._pop()

    def release(self) -> None:
        """Give the host's e-graph back as it was before this run (no-op without a host)."""
        if self.host is not None:
            self._pop_to(0)
            self._send("(pop)")
            self.host = None

    def _send(self, text: str) -> list[Any]:
        return self.egraph.run_program(*self.egraph.parse_program(text)) if text.strip() else []

    # ------------------------------------------------------------------ insertion
    def insert(self, graph: Graph, alternatives: Sequence[Graph] = ()) -> list[str]:
        """Add ``graph`` one ``let`` per node; returns the let names of its outputs. Each of
        ``alternatives`` is a graph whose first two outputs are a node of ``graph`` and what may
        replace it (a graph-level rewrite, :mod:`eqsat.graph_rewrite`): its new nodes are added
        (named by :func:`~eqsat.egraph.language.alternative_let`) and the two are made one e-class, so extraction may
        choose either and the rules apply to both."""
        names = self._terms(graph, "$n")
        self.roots = [names[o] for o in graph.outputs]
        unions = []
        for k, pair in enumerate(alternatives):
            known = self._terms(pair, alternative_prefix(k), known=names)
            a, b = (known[o] for o in pair.outputs[:2])
            unions.append(f"(union {a} {b})")
        self._send_lines(unions)
        return self.roots

    def _expr(self, n: Node, ref: dict[Node, str]) -> str | None:
        """The egglog term of ``n`` over its inputs' references (let names or ``(term K)``); None
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

    @staticmethod
    def _facts(n: Node, ref: str) -> list[str]:
        """The shape and constness facts of ``n``, referred to as ``ref``."""
        lines = [f"(set (rank {ref}) {len(n.shape)})"]
        lines.extend(f"(set (dim {ref} {k}) {d})" for k, d in enumerate(n.shape))
        if n.op == "weight":
            lines.append(f"(const {ref})")
        return lines

    def _terms(self, graph: Graph, prefix: str, facts: bool = True,
               known: dict[Node, str] | None = None) -> dict[Node, str]:
        """Send ``graph``'s nodes as ``let`` terms named by :func:`let_name`, with their shapes and
        constness unless ``facts`` is off (a graph extracted from this e-graph: every term is in
        it, with its facts, already); a term the e-graph holds already joins its e-class. Nodes
        in ``known`` (a name each) are not sent again."""
        names: dict[Node, str] = dict(known or {})
        lines: list[str] = []
        for i, n in enumerate(graph.nodes()):
            if n in names:
                continue
            expr = self._expr(n, names)
            if expr is None:
                continue
            var = names[n] = let_name(prefix, i)
            lines.append(f"(let {var} {expr})")
            if facts:
                lines.extend(self._facts(n, var))
        self._send(self._undeclared(self.lang.take_pending()))
        self._send_lines(lines)
        return names

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
            lines.extend(self._facts(n, ref[n]))
        self._send(self._undeclared(self.lang.take_pending()))
        for k in range(0, len(lines), chunk):
            self._send("\n".join(lines[k : k + chunk]))
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

    def mark_best(self, graph: Graph) -> None:
        """Mark the e-classes of ``graph`` (a graph extracted from this e-graph) ``chosen``."""
        self.marks += 1
        before = self.size()
        names = self._terms(graph, f"$b{self.marks}_", facts=False)
        if self.size() != before:  # not all of it was in the e-graph: give the new terms their facts
            names = self._terms(graph, f"$b{self.marks}f_")
        self._send_lines([f"(chosen {v})" for n, v in names.items() if not n.is_leaf])

    # ------------------------------------------------------------------ running
    def equal(self, a: str, b: str) -> bool:
        """Whether two let names (as :meth:`insert` returns them) are in one e-class."""
        try:
            self._send(f"(check (= {a} {b}))")
        except Exception:  # egglog reports a failed check as an error
            return False
        return True

    def size(self) -> int:
        sizes = dict(self._send("(print-size)")[0].sizes)
        return sum(v for k, v in sizes.items() if k in self.lang.ctors or k == "leaf")

    def _schedule(self, sets: list[str], limits: Limits) -> list[Any]:
        """Run ``sets`` (ruleset names) once, then the constness analysis to saturation. The
        by-need merge sets (``best``) run under a back-off scheduler at ``multi_match_limit``: a
        merge rule matching that often is banned, never applied."""
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
        return self._send(f"(run-schedule {' '.join(lets + runs)} (saturate (run analysis)))")

    def _batched(self, sets: list[str], limits: Limits, start: float) -> tuple[list[Any], str]:
        """One iteration batch by batch; returns its outputs and the cap that stopped or trimmed
        it ("" when every batch ran). The e-graph is saved (push) before each batch and restored
        (pop) when the batch leaves more than ``nodes x (1 + NODE_SLACK)`` e-nodes; the other
        batches still run, so the e-graph fills up to the cap with what fits."""
        out: list[Any] = []
        ceiling = limits.nodes * (1 + NODE_SLACK)
        cap = ""
        for kind in sets:
            for b in range(BATCHES):
                self._push()
                step = self._schedule([f"{kind}_{b}"], limits)
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
            judge: Callable[[], tuple[float, Graph]] | None = None) -> RunReport:
        """Run up to ``limits.iterations`` iterations; ``on_iteration`` hears about each one as it ends.

        Merges by need: when the rules saturate, ``judge`` gives the exact extracted cost of the
        e-graph and the graph that has it; while it improves (at most ``multi_by_need`` times),
        that graph's e-classes are marked ``chosen``, and one more multi-pattern iteration runs
        on pairs of marked ops only (TASO's step: merge two ops of the current best graph; a rule
        matching more than ``multi_match_limit`` times is still banned). The rewrite rules do not
        run in it (``round_rewrites`` runs them once after the merges): on the ten benchmark
        models they changed no best cost and only cost time. The round is judged
        right after that iteration: one whose optimum is no better, or that breaks a cap, ends
        the run and is discarded (the answer is the e-graph the judge before it saw; it is not
        popped, which would cost a copy of the e-graph for nothing); one that pays is followed at once
        by the next round on the graph it found. Merge rounds are TASO's greedy steps on top of
        the saturated e-graph, and the rewrite rules are not saturated again after them: on the
        ten benchmark models every round's gain showed in its merge iteration, and saturating
        after each round cost seconds on the large models for no better graph."""
        start = time.perf_counter()
        self._send("(run-schedule (saturate (run analysis)))")
        stop = "iteration limit"
        before = self.size()
        grew, last_s = 10.0, 0.0  # the first iteration's growth is a guess; it has no history
        by_need_left = limits.multi_by_need if judge is not None and self.multi_rules else 0
        best_cost, open_round, pending = math.inf, False, False  # open_round: a merge round not yet judged
        first_round = True  # no merge round has paid yet
        seen, base = None, None  # the judge that saw the e-graph as it is now; the one before a round
        judged_sizes: list[int] = []  # the e-graph's size at each judge

        def judged() -> tuple[float, Graph]:
            nonlocal seen
            answer = judge()
            seen, self.report.judges = self.report.judges, self.report.judges + 1
            judged_sizes.append(self.size())
            return answer
        for i in range(limits.iterations):
            t0 = time.perf_counter()
            by_need, pending = pending, False
            multi = i < limits.k_multi or by_need
            if by_need:  # a merge round: the merges, and the rewrites after them only if asked
                sets = ["best", "rw"] if limits.round_rewrites else ["best"]
            else:
                sets = ["multi", "rw"] if multi else ["rw"]
            cap = ""
            if t0 - start + last_s * grew * grew > limits.seconds:  # may overrun the clock: step
                out, cap = self._batched(sets, limits, start)  # batches see each other: another e-graph
                self.report.clock = self.report.clock or f"the saturation's time limit (iteration {i} stepped)"
            elif by_need:  # a merge round: one that overshoots is discarded whole
                out = self._schedule(sets, limits)
                if self.size() > limits.nodes * (1 + NODE_SLACK):
                    cap = "node limit"
            elif multi or before * grew * grew > limits.nodes:  # may overshoot the node cap
                self._push()
                out = self._schedule(sets, limits)
                if self.size() > limits.nodes * (1 + NODE_SLACK):
                    self._pop()  # it did: undo the pass and step up to the cap instead
                    out, cap = self._batched(sets, limits, start)
            else:
                out = self._schedule(sets, limits)
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
                best_cost, open_round = cost, False
                if by_need_left <= 0:  # the last round paid: its graph is the answer
                    stop = "saturated, then merged by need"
                    break
                base, seen = seen, None
                self.mark_best(best)
                open_round, pending, by_need_left, first_round = True, True, by_need_left - 1, False
                continue
            if not updated and not (i + 1 < limits.k_multi):
                stop = "saturated"
                if by_need_left <= 0:
                    break
                cost, best = judged()  # merges by need: the best graph so far, whose ops the next round pairs
                best_cost = min(best_cost, cost)
                base, seen = seen, None
                self.mark_best(best)
                open_round, pending, by_need_left = True, True, by_need_left - 1
        if open_round:  # the last merge round broke a cap before it was judged: discard it
            self.report.undone, seen = True, base
            if stop != "saturated":
                stop += " (the last by-need merge round was discarded)"
        self.report.final_enodes = judged_sizes[seen] if self.report.undone and seen is not None else self.size()
        self.report.final_judged = seen  # marks (``chosen``) are no e-nodes: that judge's view still holds
        self.report.stop = stop
        return self.report


LOAD_MS_PER_RULE = 0.7  # egglog 13.2 loading one compiled rule (measured: 0.6-0.8 ms, VGG-19's 153 in 0.11 s)
COPY_MS_PER_RULE = 0.12  # one run's saves and restores (2 pushes, 2 pops) per rule a host holds (450: 55 ms)


class RuleHost:
    """One egglog e-graph that keeps every rule and constructor any run loaded into it, each rule
    in a ruleset of its own; a run loads only what is new, saves the e-graph (push), names its
    rules' rulesets as ``rw``/``multi``/``best`` and is popped at the end. A warm saturation worker
    keeps a few (:class:`HostPool`), so a process that optimizes many models loads a rule once,
    not once per model. Rules of other runs sit in rulesets that are never run, but egglog copies
    them at every push: a host pays only where its rules are mostly the run's own."""

    def __init__(self) -> None:
        self.egraph = egglog.EGraph()
        self._send(HEADER)
        self.lines: set[str] = set()  # declarations sent
        self.rulesets: dict[str, str] = {}  # rule text (with ``:ruleset KIND``) -> its own ruleset

    def _send(self, text: str) -> None:
        self.egraph.run_program(*self.egraph.parse_program(text))

    def load(self, compiled: Compiled, memory_gb: float = math.inf) -> list[tuple[str, str]]:
        """Send what ``compiled`` needs and this e-graph lacks; the kind and ruleset of each of its
        rules, in ``compiled.rules`` order. Past ``memory_gb`` (checked every ``MEMORY_EVERY``
        rules) it stops with :class:`MemoryLimitError`."""
        new = [line for line in compiled.declarations.splitlines() if line.strip() and line not in self.lines]
        if new:
            self._send("\n".join(new))
            self.lines.update(new)
        members: list[tuple[str, str]] = []
        for i, rule in enumerate(compiled.rules):
            if i % MEMORY_EVERY == MEMORY_EVERY - 1 and rss_gb() > memory_gb:
                raise MemoryLimitError(f"loading the rules into egglog passed the {memory_gb:g} GB memory cap after "
                                       f"{i} of {len(compiled.rules)} e-graph rules; give fewer rules or a larger "
                                       f"--memory-gb")
            kind = next(k for k in KINDS if f":ruleset {k} :name" in rule)
            name = self.rulesets.get(rule)
            if name is None:
                name = f"q{len(self.rulesets)}"
                self._send(f"(ruleset {name}) " + rule.replace(f":ruleset {kind} :name", f":ruleset {name} :name"))
                self.rulesets[rule] = name
            members.append((kind, name))
        return members


class HostPool:
    """The hosts of one process, at most ``size``: a run takes the one that saves the most
    (rules it holds already, less the copies of the rules it holds and the run does not need, at
    the measured costs above), or a new one when none saves anything."""

    def __init__(self, size: int = 4):
        self.size = size
        self.hosts: list[RuleHost] = []  # most recently used last

    @staticmethod
    def saving_ms(host: RuleHost, compiled: Compiled) -> float:
        held = sum(rule in host.rulesets for rule in set(compiled.rules))
        return LOAD_MS_PER_RULE * held - COPY_MS_PER_RULE * (len(host.rulesets) - held)

    def pick(self, compiled: Compiled) -> RuleHost:
        best = max(self.hosts, key=lambda h: self.saving_ms(h, compiled), default=None)
        if best is None or self.saving_ms(best, compiled) <= 0:
            best = RuleHost()
            if len(self.hosts) >= self.size:
                self.hosts.pop(0)
        else:
            self.hosts.remove(best)
        self.hosts.append(best)
        return best

    def drop(self, host: RuleHost) -> None:
        """Forget a host a failed run may have left in any state."""
        if host in self.hosts:
            self.hosts.remove(host)
