"""The e-graph optimizer on egglog: shapes, sharing-aware extraction, limits, case studies."""
from __future__ import annotations

import contextlib

import pytest

from eqsat.cost.roofline import RooflineCost
from eqsat.egraph import Limits
from eqsat.egraph import optimize as _optimize
from eqsat.egraph.extract import read_egraph
from eqsat.egraph.language import REF
from eqsat.egraph.runner import NODE_SLACK, EGraphRunner
from eqsat.errors import ShapeError
from eqsat.ir.ops import get_op
from eqsat.models import build
from eqsat.rules.rulefile import parse_rules
from eqsat.rules.rulesets import default_rules
from eqsat.search import verify


def optimize(graph, rules, device, limits, **kwargs):
    """The e-graph search, verified against its input as every caller of a search does."""
    return verify(graph, _optimize(graph, rules, device, limits, **kwargs))


MERGE = parse_rules("""
merge: (concat :axis 1 (matmul ?A ?B) (matmul ?A ?C)) <=> (matmul ?A (concat :axis 1 ?B ?C)) ; vars=A:?x?,B:?x?,C:?x?
merge-pair: (matmul ?A ?B) (matmul ?A ?C) => (proj :index 0 (split :axis 1 :sizes [(dim (matmul ?A ?B) 1) (dim (matmul ?A ?C) 1)] (matmul ?A (concat :axis 1 ?B ?C)))) (proj :index 1 (split :axis 1 :sizes [(dim (matmul ?A ?B) 1) (dim (matmul ?A ?C) 1)] (matmul ?A (concat :axis 1 ?B ?C)))) ; vars=A:?x?,B:?x?,C:?x?
""")


def test_a_term_both_outputs_of_a_pair_rule_build_is_built_once():
    """merge-pair's two projections read the same merged matmul (and its concat): each is one
    ``let`` with one set of shape facts, not two (a tenth of SqueezeNet's rule loading)."""
    import re

    from eqsat.egraph.rewrites import compile_rules

    rule = next(r for r in compile_rules(MERGE).rules if "merge-pair" in r)
    lets = re.findall(r"\(let (\?\w+) (\([^()]*\))\)", rule)
    assert len(lets) == 4  # concat, matmul, two projections
    assert len({expr for _, expr in lets}) == len(lets)
    assert len(re.findall(r"\(set \(rank ", rule)) == len(lets)


def test_sharing_decides_the_merge_ilp_pays_split_outputs_once():
    """Each projection of the merged matmul alone costs more than its own matmul (greedy keeps the
    input); the ILP pays the merged matmul once for all three outputs and finds 34.2 µs."""
    r = optimize(build("qkv"), MERGE, "h100", Limits(iterations=4, k_multi=2))
    assert r.work.greedy_us == pytest.approx(42.28, abs=0.01)
    assert r.best_us == pytest.approx(34.2, rel=0.005) and r.work.extract == "ilp"
    assert r.verified is not None and r.verified.equal
    assert r.work.report.matches()["merge-pair"] > 0


SMALL = [r for r in default_rules() if r.name.startswith("matrix-") and int(r.name.split("-")[1]) < 400]


def test_egglog_shapes_agree_with_the_op_table():
    """Every e-node's class shape (set by egglog rules from symbolic shape rules) is what the op
    table's shape rule gives for its children's shapes: nothing ill-typed entered the e-graph."""
    graph = build("lora", tokens=8, d_model=12, rank=3)
    runner = EGraphRunner(SMALL + MERGE)
    runner.insert(graph)
    report = runner.run(Limits(iterations=3, nodes=20_000, k_multi=2))
    view = read_egraph(runner.egraph, runner.lang)
    assert ill_typed(view) == []
    checked = sum(n.op not in ("leaf", "splitproj") for n in view.nodes)
    assert checked > 20 and report.enodes > len(graph.nodes())


def ill_typed(view) -> list:
    """The e-nodes whose class shape is not what the op table gives for their children's shapes."""
    bad = []
    for n in view.nodes:
        if n.op in ("leaf", "splitproj"):
            continue
        try:
            ok = get_op(n.op).shape(dict(n.attrs), tuple(view.shapes[c] for c in n.children))[0] == view.shapes[n.eclass]
        except ShapeError:  # no valid shape at all
            ok = False
        if not ok:
            bad.append(n)
    return bad


def test_marking_a_graph_adds_no_term_of_another_let():
    """hf_vit crashed a merge round's judge (``matmul`` priced on a rank-0 input): egglog 13.2 read
    ``$b1_101`` as ``$b1_10`` in ``(chadd $b1_101 $b1_10)`` while marking the best graph, after
    ten uses of ``$b1_10``, so ``chadd(b, b)`` entered with no shape facts, and the ops above it
    too. Let names now end in ``_`` (no name is a prefix of another). The graph is the ViT's
    pattern: the bias ``b`` at index 10, its uses at the same indices, fillers between."""
    from eqsat.ir.graph import Graph, input_, node, weight

    g, b, s = weight("g", (8,)), weight("b", (8,)), weight("s", ())
    at = {9: g, 10: b, 24: s} | {i: input_(f"x{i}", (1, 4, 8)) for i in (8, 19, 40, 50, 64, 74, 91, 101)}
    norm = lambda i: node("layernorm", at[i], g, b, axis=-1, epsilon=1e-5)  # noqa: E731
    bias = lambda i: node("chadd", at[i], b, axis=2)  # noqa: E731
    at |= {11: norm(8), 20: bias(19), 28: node("smul", b, s), 41: bias(40), 51: bias(50)}
    at |= {52: norm(51), 65: bias(64)}
    at |= {66: norm(65), 75: bias(74), 92: bias(91), 102: bias(101)}
    graph = Graph(tuple(at.get(i) or weight(f"f{i}", (1,)) for i in range(103)))
    assert graph.nodes().index(at[102]) == 102 and graph.nodes().index(b) == 10
    runner = EGraphRunner([])
    runner.mark_best(graph)
    view = read_egraph(runner.egraph, runner.lang)
    assert ill_typed(view) == [] and len(view.nodes) == len(graph.nodes())


def test_a_graphs_shape_facts_arrive_as_tables_not_commands(monkeypatch):
    """Each rank, dimension and weight fact was a command of its own (30 µs each in egglog 13.2,
    five of six commands of an insertion); they now go as rows of three tables, read by egglog's
    ``input``: every e-class still has its node's shape, and exactly the weights are constant."""
    graph = build("lora", tokens=8, d_model=12, rank=3)
    runner = EGraphRunner([])
    commands: list[str] = []
    send = runner._send
    monkeypatch.setattr(runner, "_send", lambda text: commands.extend(text.splitlines()) or send(text))
    runner.insert(graph)
    view = read_egraph(runner.egraph, runner.lang)
    sets = [c for c in commands if c.startswith(("(set ", "(const "))]  # a term, an output's name or a fact
    assert len(sets) == len(graph.nodes()) + len(graph.outputs)  # no fact among them
    assert sum(c.startswith("(input ") for c in commands) == 3
    classes = {view.lets[name]: o for name, o in zip(runner.roots, graph.outputs)}
    assert classes and all(view.shapes[c] == o.shape for c, o in classes.items())
    inserted = [n for n in view.nodes if n.op not in ("leaf", "splitproj")]
    assert inserted and ill_typed(view) == []
    weights = {n.eclass for n in view.nodes if n.op == "leaf" and n.leaf in {w.attr("name") for w in graph.leaves()
                                                                            if w.op == "weight"}}
    assert weights and view.const == weights


@pytest.mark.parametrize("refused", ["mkdtemp", "open"])
def test_with_no_writable_temporary_folder_the_facts_go_as_commands(monkeypatch, refused):
    """A temporary folder that cannot be made (a read-only /tmp) or written (a full disk) costs
    the facts' speed, not them."""
    import builtins
    import tempfile

    import eqsat.egraph.facts as facts

    def refuse(*a, **k):
        raise PermissionError("read-only") if refused == "mkdtemp" else OSError(28, "No space left on device")

    if refused == "mkdtemp":
        monkeypatch.setattr(tempfile, "mkdtemp", refuse)
    else:
        real_open = builtins.open
        monkeypatch.setattr(facts, "open", lambda path, *a, **k: refuse() if str(path).endswith(".tsv")
                            else real_open(path, *a, **k), raising=False)
    graph = build("lora", tokens=8, d_model=12, rank=3)
    runner = EGraphRunner([])
    runner.insert(graph)
    view = read_egraph(runner.egraph, runner.lang)
    assert [view.shapes[view.lets[n]] for n in runner.roots] == [o.shape for o in graph.outputs]
    assert ill_typed(view) == [] and len(view.const) == sum(n.op == "weight" for n in graph.nodes())


def test_a_size_condition_filters_matches():
    """``ewmul -> matmul`` (unsound, for the test) is well typed only on square operands: its
    compiled condition compares two sizes (as a difference, see rewrites._as_comparison) and
    must keep it off the 3x5 pair while it fires on the 4x4 pair."""
    from eqsat.ir.graph import Graph, input_, node

    rule = parse_rules("square-only: (ewmul ?A ?B) => (matmul ?A ?B) ; vars=A:?x?,B:?x?")
    x, y, p, q = input_("x", (4, 4)), input_("y", (4, 4)), input_("p", (3, 5)), input_("q", (3, 5))
    graph = Graph((node("ewmul", x, y), node("ewmul", p, q), node("matmul", x, y)))
    runner = EGraphRunner(rule)
    lets = runner.insert(graph)
    runner.run(Limits(iterations=2))
    assert runner.equal(lets[0], lets[2])  # fired on the square pair
    view = read_egraph(runner.egraph, runner.lang)
    matmuls = [n for n in view.nodes if n.op == "matmul"]
    assert len(matmuls) == 1  # and only there
    assert all(get_op("matmul").shape({}, tuple(view.shapes[c] for c in n.children)) for n in matmuls)


def test_a_size_the_source_typing_fixes_is_neither_checked_nor_bound_again():
    """``concat(relu X, relu Y)`` along axis 1 only matches where X and Y agree on axes 0, 2 and 3
    (the matched concat is well typed), so the rule to ``relu(concat(X, Y))`` reads no ``dim`` of
    Y there (each such atom is a variant egglog matches again for new rows), still reads Y's axis 1
    (the new nodes' sizes add it), and rewrites the pair it matches."""
    from eqsat.egraph.rewrites import compile_rule
    from eqsat.ir.graph import Graph, input_, node

    rules = parse_rules("cat-relu: (concat :axis 1 (relu ?X) (relu ?Y)) => (relu (concat :axis 1 ?X ?Y)) ; "
                        "vars=X:?x?x?x?,Y:?x?x?x?")
    [direction] = compile_rule(rules[0]).directions
    query = " ".join(direction.facts)
    assert "(dim ?Y 1)" in query and not any(f"(dim ?Y {k})" in query for k in (0, 2, 3))
    x, y = input_("x", (1, 2, 4, 4)), input_("y", (1, 3, 4, 4))
    runner = EGraphRunner(rules)
    lets = runner.insert(Graph((node("concat", node("relu", x), node("relu", y), axis=1),
                                node("relu", node("concat", x, y, axis=1)))))
    runner.run(Limits(iterations=2))
    assert runner.equal(lets[0], lets[1])
    view = read_egraph(runner.egraph, runner.lang)
    assert ill_typed(view) == []


def test_greedy_and_ilp_are_never_worse_than_the_input():
    r = optimize(build("bert", seq=16, hidden=64, heads=4, layers=2), SMALL + MERGE, "h100", Limits(iterations=3))
    assert r.best_us <= r.work.greedy_us + 1e-9 <= r.original_us + 1e-9
    assert r.verified is not None and r.verified.equal


CHAIN = parse_rules("""
assoc: (matmul ?A (matmul ?B ?C)) <=> (matmul (matmul ?A ?B) ?C) ; vars=A:?x?,B:?x?,C:?x?
tr: (transpose (matmul ?A ?B)) <=> (matmul (transpose ?B) (transpose ?A)) ; vars=A:?x?,B:?x?
tt: (transpose (transpose ?A)) <=> (matmul ?A (transpose (transpose ?A))) ; vars=A:?x?
""")


def test_node_limit_holds_within_its_slack_inside_an_iteration():
    from eqsat.ir.graph import Graph, input_, node

    x = input_("x0", (4, 4))
    for i in range(1, 16):
        x = node("matmul", x, input_(f"x{i}", (4, 4)))
    limit = 400
    r = optimize(Graph((x,)), CHAIN[:1], "h100", Limits(iterations=30, nodes=limit, extract="greedy"))
    assert r.work.report.stop == "node limit"
    sizes = [it.enodes for it in r.work.report.iterations]
    assert max(sizes) <= limit * (1 + NODE_SLACK)  # an overshooting pass is undone and stepped in batches
    unlimited = optimize(Graph((x,)), CHAIN[:1], "h100", Limits(iterations=len(sizes), extract="greedy"))
    assert unlimited.work.enodes > limit * (1 + NODE_SLACK)  # the same iterations uncapped do overshoot
    assert r.verified is not None and r.verified.equal


def test_an_overrunning_saturation_is_killed_and_replayed():
    """The child process is killed just past limits.seconds (once it has loaded the rules; the grace
    covers loading); the result is its last snapshot or the run replayed with the iterations that
    finished (possibly none), and the report says so. The overrun is certain, not
    hoped for: associativity on a chain of 60 matmuls needs far more than the 0.3 s allowed (the
    e-graph grows to about 36,000 e-nodes), whatever the machine's speed."""
    from eqsat.ir.graph import Graph, input_, node

    x = input_("x0", (4, 4))
    for i in range(1, 60):
        x = node("matmul", x, input_(f"x{i}", (4, 4)))
    graph = Graph((x,))
    r = optimize(
        graph, CHAIN[:1], "h100", Limits(iterations=1000, nodes=10**8, seconds=0.1, extract="greedy"), hard_grace_s=0.2
    )
    assert r.work.report.stop.startswith("hard time limit")
    assert r.verified is not None and r.verified.equal and r.best_us <= r.original_us


@pytest.mark.slow
def test_lora_case_study_without_alpha():
    r = optimize(build("lora"), default_rules(), "h100", Limits())
    assert r.best_us == pytest.approx(21.4, rel=0.005)
    weak = optimize(build("lora"), default_rules(), "weak", Limits())
    assert weak.best_us == pytest.approx(RooflineCost("weak").graph_time_us(r.best), rel=1e-9)


@pytest.mark.slow
@pytest.mark.parametrize("model,expected", [("resnet_block", 57.8), ("qkv", 34.2)])
def test_case_studies_need_two_multi_pattern_iterations(model, expected):
    r = optimize(build(model), default_rules(), "h100", Limits(k_multi=2))
    assert r.best_us == pytest.approx(expected, rel=0.005)


def test_merges_by_need_reach_the_qkv_best_that_tensats_fixed_setting_misses():
    """TENSAT's setting (multi-pattern rules in the first iteration only) merges two of the three
    projections (38.2 µs); after saturation one more merge round runs, kept because the exact
    optimum improves, and reaches x . [Wq|Wk|Wv] (34.2 µs)."""
    fixed = optimize(build("qkv"), default_rules(), "h100", Limits(multi_by_need=0))
    assert fixed.best_us == pytest.approx(38.24, abs=0.01)
    r = optimize(build("qkv"), default_rules(), "h100", Limits())
    assert r.best_us == pytest.approx(34.21, abs=0.01)
    assert sum(it.multi for it in r.work.report.iterations) >= 2  # the next round, which did not pay, was discarded


@pytest.mark.slow
def test_nasrnn_needs_a_second_merge_round_and_no_saturation_after_it():
    """NasRNN's eight products per step merge pairwise: one round gives 683.41 µs, a second round
    on the graph the first found merges the merged products (647.41 µs, the α search's best)."""
    one = optimize(build("nasrnn"), default_rules(), "h100", Limits(multi_by_need=1))
    two = optimize(build("nasrnn"), default_rules(), "h100", Limits(multi_by_need=2))
    assert one.best_us == pytest.approx(683.41, abs=0.01) and two.best_us == pytest.approx(647.41, abs=0.01)
    assert two.stop == "saturated, then merged by need"


def test_a_merge_round_that_does_not_improve_the_optimum_is_discarded():
    """LoRA's optimum (the fold of W + AB) needs no merge: the round by need grows the e-graph
    without paying, so it is discarded and the e-graph extracted is the one from before it."""
    r = optimize(build("lora"), default_rules(), "h100", Limits())
    report = r.work.report
    assert r.best_us == pytest.approx(21.37, abs=0.01)
    assert report.undone and report.enodes < max(it.enodes for it in report.iterations)


def test_one_warm_saturation_worker_serves_every_model_of_a_process():
    """A run over many models pays the worker's start-up once; a worker killed at a deadline is
    replaced by a new one for the next job."""
    from eqsat.egraph.optimize import SaturationWorker

    optimize(build("qkv"), MERGE, "h100", Limits(iterations=2))
    first = SaturationWorker.shared().proc.pid
    r = optimize(build("lora"), default_rules(), "h100", Limits(iterations=2))
    assert SaturationWorker.shared().proc.pid == first and r.best_us < r.original_us
    from eqsat.ir.graph import Graph, input_, node

    x = input_("x0", (4, 4))
    for i in range(1, 60):
        x = node("matmul", x, input_(f"x{i}", (4, 4)))
    killed = optimize(Graph((x,)), CHAIN[:1], "h100", Limits(iterations=1000, nodes=10**8, seconds=0.1,
                                                                extract="greedy"), hard_grace_s=0.2)
    assert killed.work.report.stop.startswith("hard time limit")
    assert SaturationWorker.shared().proc.pid != first


def test_a_worker_says_when_it_can_take_a_job_and_a_dead_one_is_closed():
    """``ready`` answers once the worker has imported egglog, and the worker then serves a job; a
    worker that cannot answer is closed, so no late reply can reach a later job."""
    from eqsat.egraph.optimize import SaturationWorker
    from eqsat.egraph.rewrites import compile_rules

    worker = SaturationWorker()
    try:
        assert worker.ready()
        view, roots, report, _ = worker.saturate(compile_rules(MERGE), build("qkv"), Limits(iterations=2))
        assert len(report.iterations) == 2 and len(roots) == 3  # QKV's three outputs
        worker.proc.kill()
        worker.proc.join()
        assert not worker.ready(timeout=1.0) and worker.conn.closed
    finally:
        worker.close()


@pytest.mark.parametrize("announced", [True, False])
def test_the_hard_limit_gives_way_to_the_proof_the_worker_announces(announced):
    """After the run the worker proves the final e-graph itself (``MergeJudge.prove_final``) and
    first sends ``("proving", seconds)``: the saturation's hard limit then waits that long for the
    answer. Scripted here, the worker's end of the pipe answers 1 s after a 0.1 s saturation's
    hard limit: announced, its answer is taken; not announced, the worker is killed at the limit and
    the last snapshot is the answer (as in an overrun). A spawned worker would not see a test's
    monkeypatch, so no proof can be made to outlast the limit there."""
    import multiprocessing
    import threading
    import time

    from eqsat.egraph.limits import RunReport
    from eqsat.egraph.optimize import SaturationWorker
    from eqsat.egraph.view import EGraphView

    class Process:  # what close() asks of the worker's process
        killed = False

        def is_alive(self):
            return not self.killed

        def kill(self):
            self.killed = True

        def join(self):
            pass

    def script(end):
        end.recv_bytes()  # the job
        end.send(("started", (0.0, 0.0, 0.0)))
        end.send(("snapshot", (EGraphView(), ["r"], RunReport(stop="snapshot"), 0.0)))
        if announced:
            end.send(("proving", 5.0))
        time.sleep(1.0)  # proving, past the saturation's hard limit
        with contextlib.suppress(OSError):  # closed by the parent at the limit
            end.send(("done", (EGraphView(), ["r"], RunReport(stop="saturated, then merged by need"), 0.05, None)))

    worker = SaturationWorker.__new__(SaturationWorker)
    worker.conn, end = multiprocessing.Pipe(duplex=True)
    worker.proc, worker.prepared = Process(), None
    scripted = threading.Thread(target=script, args=(end,), daemon=True)
    scripted.start()
    _, roots, report, _ = worker.saturate("rules", build("qkv"), Limits(seconds=0.1), grace_s=5.0)
    scripted.join()
    assert roots == ["r"]
    if announced:
        assert report.stop == "saturated, then merged by need" and not worker.proc.killed
    else:
        assert report.stop.startswith("hard time limit") and report.clock == "the saturation's hard time limit"
        assert worker.proc.killed


def test_an_experiment_waits_for_the_worker_before_its_first_timed_search(monkeypatch):
    """``compare``'s first e-graph cell paid the worker's start-up inside its search time (BERT
    0.40 s against 0.20 s warm): ``prepare_rules`` now starts the worker and waits until it answers."""
    import experiments.searches as searches
    from eqsat.egraph.optimize import SaturationWorker

    asked = []
    ready = SaturationWorker.ready
    monkeypatch.setattr(SaturationWorker, "ready", lambda self, timeout=60.0: asked.append(self) or ready(self, timeout))
    monkeypatch.setattr(searches, "_PREPARED", {})
    searches.prepare_rules("eqsat")
    assert asked == [SaturationWorker.shared()] and SaturationWorker.shared().alive
    searches.prepare_rules("eqsat")  # once per process
    assert len(asked) == 1


def _saturated_qkv(limits):
    """QKV saturated with the merge rules: the runner, its e-graph as data and the root e-classes."""
    runner = EGraphRunner(MERGE)
    roots = runner.insert(build("qkv"))
    runner.run(limits)
    view = read_egraph(runner.egraph, runner.lang)
    return runner, view, [view.lets[r] for r in roots]


def test_marking_an_extracted_graph_adds_no_enode_and_marks_its_classes():
    """A merge round marks the best graph's e-classes ``chosen`` by naming its terms again; they
    are all in the e-graph, so no e-node (nor any shape fact) is added. A graph that is not in it
    (new terms) still gets its shapes, so later size conditions and extraction see them."""
    from eqsat.egraph.extract import extract, node_costs, to_graph

    graph = build("qkv")
    runner, view, lets = _saturated_qkv(Limits(iterations=2, k_multi=1))
    found = extract(view, node_costs(view, RooflineCost("h100"), graph.dtype), lets, "ilp", 10.0)
    best = to_graph(view, found.choice, lets, {n.attr("name"): n for n in graph.leaves()}, graph)
    before = runner.size()
    runner.mark_best(best)
    assert runner.size() == before
    marked = len(runner.egraph.freeze().functions["chosen"].rows)
    assert marked == sum(not n.is_leaf and n.op != "split" for n in best.nodes())  # splits live as projections
    sent: list[str] = []
    send = runner._send
    runner._send = lambda text: sent.append(text) or send(text)  # type: ignore[method-assign]
    runner.mark_best(best)  # marked already: no term nor mark is sent again (only its outputs' new names)
    assert sent and not any(f"(set ({REF} " in t or "(chosen" in t for t in sent), sent
    runner._push()
    runner.marked = {}  # as if none were marked: this mark is sent at push level 1
    runner.mark_best(best)
    runner._pop()  # takes that mark back: the next one is sent again
    sent.clear()
    runner.mark_best(best)
    assert any("(chosen" in t for t in sent) and len(runner.egraph.freeze().functions["chosen"].rows) == marked
    runner._send = send  # type: ignore[method-assign]
    from eqsat.models.builder import ModelBuilder

    b = ModelBuilder("other", graph.dtype)  # leaves of its own: every term is new
    other = b.graph(b.op("matmul", b.input("p", (3, 4)), b.weight("q", (4, 5))))
    runner.mark_best(other)
    assert runner.size() > before
    view = read_egraph(runner.egraph, runner.lang)
    for n in view.nodes:
        if n.op not in ("leaf", "splitproj"):
            ins = tuple(view.shapes[c] for c in n.children)
            assert get_op(n.op).shape(dict(n.attrs), ins)[0] == view.shapes[n.eclass], n


@pytest.mark.parametrize("model, judges, final", [("qkv", 3, 1), ("lora", 1, 0)])
def test_the_final_egraph_is_the_one_a_judge_saw(model, judges, final):
    """Merges by need judge the e-graph after saturation and after each round; a discarded round
    leaves the e-graph its judge-before saw (one that changed nothing is not judged again: LoRA),
    a paying last round the one its own judge saw. The
    worker then sends no e-graph, and the answer is the same as extracting the one it would send
    (in process, where the final e-graph is read anyway)."""
    from eqsat.egraph.optimize import _saturate, final_view
    from eqsat.egraph.rewrites import compile_rules

    isolated = optimize(build(model), default_rules(), "h100", Limits())
    report = isolated.work.report
    assert (report.judges, report.final_judged) == (judges, final)
    inline = optimize(build(model), default_rules(), "h100", Limits(), isolate=False)
    assert inline.best_us == isolated.best_us and inline.best.digest == isolated.best.digest

    class Runner:  # final_view reads only when no judge saw the final e-graph
        egraph, lang = None, None

    assert final_view(Runner(), report) is None
    view, _, plain, _ = _saturate(compile_rules(default_rules()), build(model), Limits(multi_by_need=0))
    assert plain.judges == 0 and plain.final_judged is None and view is not None


def test_a_merge_round_that_breaks_the_node_cap_is_discarded_whole():
    """QKV's second merge round grows the e-graph from 61 to 93 e-nodes; under a cap of 80 it
    is discarded at once, not stepped batch by batch up to the cap and then discarded anyway.
    The first round's graph (34.21 µs) is the answer."""
    r = optimize(build("qkv"), default_rules(), "h100", Limits(nodes=80))
    report = r.work.report
    assert r.best_us == pytest.approx(34.21, abs=0.01)
    assert report.stop == "node limit (the last by-need merge round was discarded)"
    assert [it.enodes for it in report.iterations][-2:] == [61, 93] and report.enodes == 61
    assert report.final_judged == 1 and report.judges == 2  # the overshooting round was never judged


def _run_once(rules, graph, host=None):
    """One saturation (2 iterations, merges in the first) in a host's e-graph or a new one: its
    iteration sizes and the number of rules the host holds after it."""
    from eqsat.egraph.rewrites import compile_rules

    runner = EGraphRunner(compile_rules(rules), host=host)
    runner.insert(graph)
    report = runner.run(Limits(iterations=2, k_multi=1))
    sizes = [it.enodes for it in report.iterations]
    runner.release()
    return sizes, (len(host.rulesets) if host is not None else 0)


def test_a_rule_host_loads_each_rule_once_and_runs_as_a_new_egraph_would():
    """A warm worker keeps its rules loaded between models: a second run of the same rules loads
    none, a run after another model's rules saturates exactly as in a new e-graph, and the host's
    e-graph is empty again after each run (the other model's terms are gone)."""
    from eqsat.egraph.runner import RuleHost

    host = RuleHost()
    fresh_qkv, _ = _run_once(MERGE + SMALL, build("qkv"))
    first, held = _run_once(MERGE + SMALL, build("qkv"), host)
    again, held_again = _run_once(MERGE + SMALL, build("qkv"), host)
    assert first == again == fresh_qkv and held_again == held > 0
    fresh_lora, _ = _run_once(SMALL, build("lora"))
    lora, _ = _run_once(SMALL, build("lora"), host)
    assert lora == fresh_lora
    sizes = dict(host.egraph.run_program(*host.egraph.parse_program("(print-size)"))[0].sizes)
    assert sum(sizes.values()) == 0


def test_a_graph_needing_a_constructor_only_an_earlier_runs_rules_declared_runs_in_the_same_host():
    """The host declared qkv's matmul constructor for qkv's rules; a later run whose rules lack it
    but whose graph has that matmul inserts its graph without declaring it twice (egglog refused:
    'Function already bound', a T5 encoder after a LLaMA in one process)."""
    from eqsat.egraph.runner import RuleHost

    host = RuleHost()
    _run_once(MERGE, build("qkv"), host)
    ewadd_only = parse_rules("comm: (ewadd ?a ?b) <=> (ewadd ?b ?a)")
    alone, _ = _run_once(ewadd_only, build("qkv"))
    assert _run_once(ewadd_only, build("qkv"), host)[0] == alone


def test_the_host_pool_starts_a_new_host_when_reuse_would_not_pay():
    """A host pays for the copies of every rule it holds at each save, so a run whose rules are
    a small part of a big host gets a new one; a run whose rules it holds gets it back. A large
    graph gets no host: its rules are loaded after it, planned on its own sizes."""
    from eqsat.egraph.host import HOST_MAX_NODES, HostPool
    from eqsat.egraph.rewrites import compile_rules

    pool = HostPool()
    big, small = compile_rules(default_rules()), compile_rules(MERGE)
    h = pool.pick(big, 100)
    h.load(big)
    assert pool.pick(big, 100) is h
    assert pool.pick(small, 100) is not h and len(pool.hosts) == 2
    assert HostPool.saving_ms(h, small) <= 0 < HostPool.saving_ms(h, big)
    assert pool.pick(big, HOST_MAX_NODES + 1) is None and len(pool.hosts) == 2


def test_a_run_takes_the_host_preloaded_under_its_key():
    """A preload under a graph's key makes a host of its own when every host that holds its rules
    holds others too, and the run under that key takes it, though another host holds more of the
    run's relevant rules (``compare``'s VGG-19 took SqueezeNet's host and loaded its rules again).
    A host the pool forgets is forgotten under its key too."""
    from eqsat.egraph.host import HostPool
    from eqsat.egraph.rewrites import compile_rules

    pool = HostPool(size=2)
    big, small = compile_rules(default_rules()), compile_rules(MERGE)
    other = pool.pick(big, 100)
    other.load(big, only=[0])
    other.load(small)  # holds all of small's rules, and one more
    pool.preload(small.declarations, small.rules[:1], [], key="k")
    mine = pool.preloaded["k"]
    assert mine is not other and set(mine.rulesets) == set(small.rules[:1])
    assert HostPool.saving_ms(other, small) > HostPool.saving_ms(mine, small)
    assert pool.pick(small, 100, key="k") is mine and pool.pick(small, 100) is other
    pool.pick(big, 100, key="new")  # the pool keeps two: mine, least recently used, goes
    pool._keep(pool._new_host())
    assert mine not in pool.hosts and "k" not in pool.preloaded


def test_the_ilp_starts_from_the_graph_the_last_judge_found():
    """Each merge round only adds to the e-graph, so the last judge's graph lies in the next one:
    found there node by node (egg's lookup), it is the ILP's start where it beats greedy. A graph
    with a node the e-graph lacks is not found."""
    from eqsat.egraph.extract import extract, greedy_dag, lookup_choice, node_costs, to_graph
    from eqsat.egraph.view import selection_cost
    from eqsat.ir.graph import Graph, node

    graph = build("qkv")
    _, view, lets = _saturated_qkv(Limits(iterations=3, k_multi=2))
    costs = node_costs(view, RooflineCost("h100"), graph.dtype)
    leaves = {n.attr("name"): n for n in graph.leaves()}
    best = extract(view, costs, lets, "ilp", 10.0)
    found = to_graph(view, best.choice, lets, leaves, graph)
    greedy = greedy_dag(view, costs, lets)
    hinted = lookup_choice(view, found, lets, greedy)
    assert hinted is not None and selection_cost(view, costs, hinted, lets) == pytest.approx(best.cost)
    assert selection_cost(view, costs, greedy, lets) > best.cost  # greedy alone misses the merge
    again = extract(view, costs, lets, "ilp", 10.0, hint=found)
    assert again.cost == pytest.approx(best.cost) and again.greedy_cost == best.greedy_cost
    stranger = Graph(tuple(node("relu", o) for o in found.outputs), graph.dtype, graph.name)
    assert lookup_choice(view, stranger, lets, greedy) is None


def test_merge_rounds_run_the_rewrites_only_when_asked():
    """By default a merge round runs the merges alone (no best cost on the ten models needed the
    rewrites after them); ``round_rewrites`` runs them once after the merges, as before."""
    plain = optimize(build("qkv"), default_rules(), "h100", Limits())
    with_rw = optimize(build("qkv"), default_rules(), "h100", Limits(round_rewrites=True))
    assert plain.best_us == pytest.approx(34.21, abs=0.01) and with_rw.best_us == pytest.approx(34.21, abs=0.01)
    assert plain.work.report.enodes < with_rw.work.report.enodes


@pytest.mark.parametrize("model", ["bert", "resnet_block", "nasrnn"])
def test_a_rule_loads_once_its_trigger_matches_and_the_run_is_the_same(model):
    """egglog 13.2 takes 0.4-1.1 ms to load one rule and VGG-19's 268 took 0.21 s, while 25 of
    them ever match. A rule sleeps until its trigger (its source patterns alone) matches, so every
    iteration must match as with every rule loaded, the merges' iteration too, where the rewrites
    run on what the merges made (BERT's ``matrix-0086~``). A trigger itself is loaded only once
    every constructor it reads has a row: on NasRNN some are loaded mid-run, as merges make the
    first concat or split."""
    from eqsat.egraph.relevance import relevant_rules
    from eqsat.egraph.rewrites import compile_rules

    graph = build(model, layers=1) if model == "bert" else build(model)
    rules = relevant_rules(default_rules(), graph, False)

    def run(lazy: bool):
        runner = EGraphRunner(compile_rules(rules), lazy=lazy)  # a run declares its graph's ops in its own
        runner.insert(graph)
        report = runner.run(Limits(multi_by_need=0))
        roused.append(runner.run_rules.roused)
        return [(it.enodes, {k: v for k, v in it.matches.items() if v}) for it in report.iterations], report

    roused: list[int] = []
    (eager, every), (lazy, some) = run(False), run(True)
    assert lazy == eager and len(eager) > 1
    assert some.egglog_rules_loaded < every.egglog_rules_loaded == every.egglog_rules
    assert roused[0] == 0 and (roused[1] > 0 or model != "nasrnn")


def test_the_worker_judges_its_merges_with_this_process_solving_half_the_parts(monkeypatch):
    """The worker judges its own merges (``MergeJudge`` travels with the job); a judge's program in
    parts is solved two at a time, this process, waiting for the job's end, solving those it is
    sent (NasRNN's judges split). The answer is the one this process finds alone."""
    import importlib

    module = importlib.import_module("eqsat.egraph.optimize")
    solved: list[int] = []
    solve_one = module.solve_one
    monkeypatch.setattr(module, "solve_one", lambda *a: solved.append(1) or solve_one(*a))
    limits = Limits(ilp_nodes=0)  # no proof of the whole e-graph after the judges: every part here is a judge's
    alone = optimize(build("nasrnn"), default_rules(), "h100", limits, isolate=False)
    helped = optimize(build("nasrnn"), default_rules(), "h100", limits)
    assert helped.work.report.judges >= 2 and solved
    assert helped.best_us == alone.best_us  # the graphs may differ between ties


class _Unsendable(RooflineCost):
    """A cost model that does not pickle (as one holding a module: ``torch-cpu``'s)."""

    def __getstate__(self):
        raise TypeError("cannot pickle this cost model")


def test_a_judge_that_cannot_be_sent_judges_here_with_the_worker_solving_half_the_parts(monkeypatch):
    """Where the judge does not pickle, the worker asks this process, which judges with the worker
    as its part helper; the answer is the one this process finds alone."""
    from eqsat.egraph import ilp
    from eqsat.egraph.part_helper import WorkerHelper

    monkeypatch.setattr(ilp, "FILTER_SPLIT_COLUMNS", 0)
    sent: list[int] = []
    submit = WorkerHelper.submit
    monkeypatch.setattr(WorkerHelper, "submit", lambda self, *a: sent.append(1) or submit(self, *a))
    limits = Limits(ilp_nodes=0)
    alone = optimize(build("bert"), default_rules(), "h100", limits, isolate=False)
    assert not sent
    helped = optimize(build("bert"), default_rules(), _Unsendable("h100"), limits)
    assert helped.work.report.judges >= 2 and len(sent) >= helped.work.report.judges
    assert (helped.best_us, helped.best) == (alone.best_us, alone.best)


def test_a_worker_that_stops_answering_a_judges_part_leaves_a_replayed_answer(monkeypatch):
    """Where this process judges (a judge that cannot be sent), a part helper that gets no answer
    closes the worker (a late answer would come when the run expects an iteration) and solves the
    part itself; the run then ends as a killed worker's does: the iterations the worker finished
    replayed here, no merge round, a verified answer (BERT: the saturated e-graph's 281.68 µs
    where merges by need reach 249.36)."""
    from eqsat.egraph import ilp
    from eqsat.egraph.part_helper import WorkerHelper

    monkeypatch.setattr(ilp, "FILTER_SPLIT_COLUMNS", 0)
    limits = Limits(ilp_nodes=0)
    alone = optimize(build("bert"), default_rules(), "h100", limits, isolate=False)
    result = WorkerHelper.result

    def silent(self, seconds):  # the first answer never comes
        if self.worker.alive:
            self.worker.close()
            self.pending = 0
            return None
        return result(self, seconds)

    monkeypatch.setattr(WorkerHelper, "result", silent)
    helped = optimize(build("bert"), default_rules(), _Unsendable("h100"), limits)
    report = helped.work.report
    assert "replayed" in report.stop
    assert alone.best_us < helped.best_us < helped.original_us


def test_a_part_this_process_answers_late_is_solved_by_the_worker_and_skipped_after(monkeypatch):
    """A judge's part whose answer does not come in time is solved by the worker, which sends no
    more parts in that job (the judge's answer is then the clock's); the late answer, read between
    jobs, is skipped, and the next job is served as usual."""
    import importlib
    import time

    module = importlib.import_module("eqsat.egraph.optimize")
    solve_one = module.solve_one
    calls: list[int] = []

    def late(*a):  # the first answer comes after the worker stopped waiting for it
        calls.append(1)
        if len(calls) == 1:
            time.sleep(3.5)  # past the worker's wait: at most the clock's 2 s and 1 s more
        solve_one(*a)

    monkeypatch.setattr(module, "solve_one", late)
    # a judge waits for a part at most a second past its clock (here two seconds, a margin for a slow
    # machine to send its first part in time): its answer is the clock's, and the run a verified one
    helped = optimize(build("nasrnn"), default_rules(), "h100", Limits(ilp_nodes=0, ilp_seconds=2.0))
    assert len(calls) == 1 and helped.best_us < helped.original_us
    after = optimize(build("qkv"), MERGE, "h100", Limits(iterations=2))
    assert after.best_us == optimize(build("qkv"), MERGE, "h100", Limits(iterations=2), isolate=False).best_us


def _proofs_watched(monkeypatch):
    """Every proof made ahead (``Speculation.run``), every one left unused (``undo``) and every
    final extraction the parent runs after the saturation, as they happen."""
    import importlib

    from eqsat.egraph import judging

    module = importlib.import_module("eqsat.egraph.optimize")
    seen: dict[str, list] = {"made": [], "undone": [], "finals": []}
    run, undo, final_extraction = judging.Speculation.run.__func__, judging.Speculation.undo, module.final_extraction
    monkeypatch.setattr(judging.Speculation, "run", classmethod(lambda cls, *a: seen["made"].append(run(cls, *a))
                                                                 or seen["made"][-1]))
    monkeypatch.setattr(judging.Speculation, "undo", lambda self: seen["undone"].append(self.index) or undo(self))
    monkeypatch.setattr(module, "final_extraction", lambda *a: seen["finals"].append(1) or final_extraction(*a))
    return seen


def test_the_e_graph_the_last_round_starts_from_is_proved_while_that_round_runs(monkeypatch):
    """BERT's last merge round does not pay, so its answer is the e-graph that round started from:
    the parent proves it while the worker runs the round (the worker sends that e-graph once), and
    extracts nothing after the run. The answer, its status and its gap are the ones found in one
    process. A proof ahead that a clock cut short is not used: the final extraction runs as ever."""
    from dataclasses import replace

    from eqsat.egraph import judging

    seen = _proofs_watched(monkeypatch)
    alone = optimize(build("bert"), default_rules(), "h100", Limits(), isolate=False)
    assert seen["finals"] and not seen["made"]  # in one process: the final extraction, after the run
    seen["finals"].clear()
    ahead = optimize(build("bert"), default_rules(), "h100", Limits())
    report = ahead.work.report
    assert report.undone and report.judges >= 2
    assert [s.index for s in seen["made"]] == [report.final_judged] and seen["made"][0].found is not None
    assert not seen["finals"] and not seen["undone"]
    assert (ahead.best_us, ahead.best) == (alone.best_us, alone.best)
    assert (ahead.work.ilp_status, ahead.work.gap) == (alone.work.ilp_status, alone.work.gap)

    proof_of = judging.proof_of
    monkeypatch.setattr(judging, "proof_of", lambda *a: replace(proof_of(*a), clock="the extraction's time limit"))
    seen["made"].clear()
    cut = optimize(build("bert"), default_rules(), "h100", Limits())
    assert len(seen["made"]) == 1 and seen["made"][0].found is None and seen["finals"] == [1]
    assert (cut.best_us, cut.best, cut.clock) == (alone.best_us, alone.best, alone.clock)


def test_a_last_round_that_pays_leaves_the_proof_made_ahead_unused(monkeypatch):
    """NasRNN's last merge round pays: the proof made while it ran is of an earlier e-graph, and
    goes unused (the record of relaxations put back as it was); the worker proves the final
    e-graph after the run (this process extracts nothing), with the answer found in one process."""
    from eqsat.egraph import judging
    from eqsat.egraph.solvers import RELAXATIONS

    seen = _proofs_watched(monkeypatch)
    alone = optimize(build("nasrnn"), default_rules(), "h100", Limits(), isolate=False)
    seen["finals"].clear()
    before, proofs = [], []
    restore = RELAXATIONS.restore
    monkeypatch.setattr(RELAXATIONS, "restore", lambda saved: before.append(saved) or restore(saved))
    adopt = judging.MergeJudge.adopt
    monkeypatch.setattr(judging.MergeJudge, "adopt", lambda self, *a: adopt(self, *a) or proofs.append(self.proof_s))
    ahead = optimize(build("nasrnn"), default_rules(), "h100", Limits())
    report = ahead.work.report
    assert not report.undone and len(seen["made"]) == 1 and seen["made"][0].index != report.final_judged
    assert seen["undone"] == [seen["made"][0].index] and before[-1] == seen["made"][0].relaxations
    assert not seen["finals"] and ahead.best_us == alone.best_us
    # the worker's proof came after the run: its seconds are counted in the extraction phase
    assert ahead.work.ilp_status == alone.work.ilp_status and ahead.timings["extract"] >= proofs[-1] > 0


def test_a_judges_references_mark_the_best_graph_without_its_terms():
    """The judge's answer gives each node's e-class; the worker's read of the e-graph gives the
    reference the runner named each e-class by: a mark names those e-classes by them, sends no
    term for them, and marks the same e-classes as naming every term does."""
    from eqsat.egraph.extract import extract, node_costs, to_graph
    from eqsat.egraph.judging import known_refs

    graph = build("qkv")
    for by_class in (False, True):
        runner, _, _ = _saturated_qkv(Limits(iterations=2, k_multi=1))
        refs: dict[int, str] = {}
        view = read_egraph(runner.egraph, runner.lang, refs=refs)
        lets = [view.lets[r] for r in runner.roots]
        found = extract(view, node_costs(view, RooflineCost("h100"), graph.dtype), lets, "ilp", 10.0)
        classes: dict = {}
        best = to_graph(view, found.choice, lets, {n.attr("name"): n for n in graph.leaves()}, graph, classes)
        known = known_refs(best, [classes.get(n) for n in best.nodes()], refs) if by_class else None
        sent: list[str] = []
        send = runner._send
        runner._send = lambda text, send=send, sent=sent: sent.append(text) or send(text)  # type: ignore[method-assign]
        runner.mark_best(best, known)
        chosen = runner.egraph.freeze().functions["chosen"].rows
        terms = sum(t.count(f"(set ({REF} ") for t in sent)
        if not by_class:
            plain_terms, plain_rows = terms, len(chosen)
    assert known and len(chosen) == plain_rows and terms < plain_terms
