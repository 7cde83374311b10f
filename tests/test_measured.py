"""The measured cost model (``ort-cpu``): kernels as keys, the measurement database, pricing that
follows the runtime's fusions, and both searches on it."""
from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from eqsat.cost.measured import OrtCpuCost, Timing, database, node_kernel, op_kernel
from eqsat.cost.measured import ortcpu as ortcpu_module
from eqsat.cost.measured.database import Context, MeasurementDB
from eqsat.cost.measured.kernels import fused_kernel
from eqsat.cost.registry import cost_model, measured_threads
from eqsat.ir.graph import Graph, input_, node, weight


class FakeTimer:
    """Stands in for onnxruntime: a kernel's time is 10 µs per op in it (30 µs per product) plus
    1 µs per 1,000 rows of its output, plus a 5 µs run call (a projection is free); counts the kernels it was asked to time."""

    def __init__(self):
        self.calls: list[str] = []
        self.cold: list[bool] = []

    def __call__(self, graph: Graph, threads: int = 1, warmup: int = 8, runs: int = 32, seed: int = 0,
                 cold_weights: bool = False) -> Timing:
        self.calls.append(graph.name)
        self.cold.append(cold_weights)
        if graph.name == "overhead":
            return Timing(5.0, 5.0, 5.0, runs)
        us = 5.0 + sum((30.0 if n.op == "matmul" else 10.0) + n.shapes[0][0] * 1e-3
                       for n in graph.nodes() if not n.spec.is_leaf and n.op != "proj")
        return Timing(us, us, us, runs)


@pytest.fixture
def fake(monkeypatch, tmp_path):
    timer = FakeTimer()
    monkeypatch.setattr(ortcpu_module, "time_graph", timer)
    monkeypatch.setenv("EQSAT_LAB_MEASUREMENTS", str(tmp_path / "db.jsonl"))
    monkeypatch.setattr(database, "_OPEN", {})
    monkeypatch.setattr(database, "machine_load", lambda: (0.5, 2))  # a quiet machine, whatever CI's load
    return timer


def new_process() -> None:
    """Forget the databases this process has open, as a new process would start."""
    database._OPEN.clear()


def small_cnn() -> Graph:
    x = input_("x", (1, 8, 8, 8))
    a = node("conv2d", x, weight("w1", (8, 8, 3, 3)), pad="same")
    b = node("relu", a)
    return Graph((node("ewadd", node("conv2d", b, weight("w2", (8, 8, 1, 1)), pad="same"), x),))


def test_device_names():
    assert measured_threads("ort-cpu") == 1 and measured_threads("ort-cpu:4") == 4
    assert measured_threads("h100") is None
    with pytest.raises(ValueError, match="thread count"):
        measured_threads("ort-cpu:0")


def test_kernel_keys_tell_weights_from_activations():
    x, w = input_("x", (4, 16)), weight("w", (16, 16))
    by_weight, by_input = node_kernel(node("matmul", x, w)), node_kernel(node("matmul", x, input_("y", (16, 16))))
    assert by_weight.key != by_input.key
    assert by_weight.key == op_kernel("matmul", {}, [(4, 16), (16, 16)], [False, True]).key
    g = by_weight.graph()
    assert [n.op for n in g.leaves()] == ["input", "weight"] or {n.op for n in g.leaves()} == {"input", "weight"}


def test_runtime_fusions_price_what_the_consumer_adds(fake):
    x = input_("x", (1, 8, 8, 8))
    conv = node("conv2d", x, weight("w", (8, 8, 3, 3)), pad="same")
    relu = node("relu", conv)
    kernel, producer = fused_kernel(relu)
    assert producer is conv and kernel.name == "conv2d+relu"
    model = OrtCpuCost(progress=False)
    # the fake charges 10 µs per op: a relu alone costs 10 µs (+ its elements), fused onto the conv
    # it costs what the two-op kernel adds
    assert model.node_time_us(relu) == pytest.approx(10.0 + 1e-3)
    assert fused_kernel(node("relu", x)) is None
    assert fused_kernel(node("relu", node("conv2d", x, input_("k", (8, 8, 3, 3)), pad="same"))) is not None
    w = weight("w2", (8, 8, 3, 3))
    assert fused_kernel(node("relu", node("conv2d", weight("c", (1, 8, 8, 8)), w, pad="same"))) is None  # folded
    mm = node("matmul", input_("a", (4, 16)), weight("b", (16, 32)))
    bias = node("chadd", mm, weight("bias", (32,)), axis=1)
    assert fused_kernel(bias)[0].name == "matmul+chadd"


def test_the_database_is_reused_by_a_second_process(fake, tmp_path):
    graph = small_cnn()
    first = OrtCpuCost(progress=False)
    price = first.graph_time_us(graph)
    assert first.measured > 0 and price > 0
    calls = len(fake.calls)
    new_process()
    second = OrtCpuCost(progress=False)
    assert second.graph_time_us(graph) == price
    assert second.measured == 0 and len(fake.calls) == calls  # nothing timed again, not even the run call
    lines = (tmp_path / "db.jsonl").read_text().splitlines()
    assert len(lines) == first.measured + 1  # + the run-call overhead
    assert {json.loads(line)["threads"] for line in lines} == {1}


def test_corrupt_and_foreign_lines_are_skipped_with_a_warning(fake, tmp_path):
    graph = small_cnn()
    OrtCpuCost(progress=False).graph_time_us(graph)
    path = tmp_path / "db.jsonl"
    lines = path.read_text().splitlines()
    good = json.loads(lines[0])
    foreign = dict(good, machine="another-machine", timing=dict(good["timing"], median_us=1e9))
    nan = dict(good, timing=dict(good["timing"], median_us=float("nan")))
    path.write_text("\n".join([json.dumps(foreign), "{not json", json.dumps({"key": 3}), json.dumps(nan)]
                              + lines) + "\n")
    new_process()
    with pytest.warns(UserWarning, match=r"db.jsonl: 3 corrupt line\(s\) skipped; 1 line\(s\) from another"):
        again = OrtCpuCost(progress=False)
    assert again.db.timings[good["key"]].median_us == good["timing"]["median_us"]  # the foreign one is not used
    assert again.graph_time_us(graph) == OrtCpuCost(progress=False).graph_time_us(graph)
    assert again.measured == 0


def test_a_timing_taken_under_contention_is_timed_again_once_the_machine_is_quiet(fake, tmp_path, monkeypatch):
    graph = small_cnn()
    price = OrtCpuCost(progress=False).graph_time_us(graph)
    path = tmp_path / "db.jsonl"
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    # as a busy machine timed them: four times slower, at load 9.5 on 2 cores, or with no load recorded (older lines)
    inflated = [dict(r, timing={k: v * 4 if k.endswith("_us") else v for k, v in r["timing"].items()},
                     **({"load1": 9.5} if i % 2 else {})) for i, r in enumerate(lines)]
    for r in inflated[::2]:
        r.pop("load1"), r.pop("cores")
    path.write_text("".join(json.dumps(r) + "\n" for r in inflated))
    new_process()
    monkeypatch.setattr(database, "machine_load", lambda: (3.0, 2))  # still busy: the old timings serve
    busy = OrtCpuCost(progress=False)
    assert busy.graph_time_us(graph) == pytest.approx(4 * price) and busy.measured == 0
    new_process()
    monkeypatch.setattr(database, "machine_load", lambda: (0.5, 2))  # quiet: each kernel timed again, once
    quiet = OrtCpuCost(progress=False)
    assert quiet.graph_time_us(graph) == pytest.approx(price) and quiet.measured == len(lines) - 1  # - run call
    new_process()
    later = OrtCpuCost(progress=False)  # reads the quiet lines after the inflated ones: nothing timed
    assert later.graph_time_us(graph) == pytest.approx(price) and later.measured == 0
    assert len(path.read_text().splitlines()) == 2 * len(lines)


def test_a_kernel_another_process_timed_meanwhile_is_read_not_timed_again(fake, tmp_path):
    graph = small_cnn()
    mine = OrtCpuCost(progress=False)
    assert mine.overhead_us > 0
    new_process()
    other = OrtCpuCost(progress=False)  # another process, appending to the same file
    other.graph_time_us(graph)
    timed = len(fake.calls)
    assert mine.graph_time_us(graph) == other.graph_time_us(graph)
    assert len(fake.calls) == timed and mine.measured == 0


def test_a_gain_below_the_resolution_keeps_the_input(fake):
    from eqsat.models import build
    from eqsat.search import keep_unresolved_gain
    from experiments.searches import search_result

    graph = build("lora")
    _, result = search_result(graph, "lora", "eqsat", "h100", quick=True)
    assert result.best_us < 0.9 * result.original_us  # the weight fold
    tiny = keep_unresolved_gain(graph, result, SimpleNamespace(resolution=1.0, end_to_end_us=lambda a, b: None))
    assert tiny.best == graph and tiny.best_us == tiny.original_us and "resolution" in tiny.stop
    assert keep_unresolved_gain(graph, result, SimpleNamespace(resolution=0.0)) is result
    # a model that times whole graphs decides on the end-to-end times
    slower = SimpleNamespace(resolution=0.02, end_to_end_us=lambda a, b: (100.0, 99.0))
    slow = keep_unresolved_gain(graph, result, slower)
    assert slow.best == graph and slow.kept.guard == "end-to-end" and slow.kept.basis == "measured end to end"
    assert (slow.kept.input_us, slow.kept.best_us, slow.kept.threshold) == (100.0, 99.0, 0.02)
    faster = SimpleNamespace(resolution=0.02, end_to_end_us=lambda a, b: (100.0, 50.0))
    kept = keep_unresolved_gain(graph, result, faster)
    assert kept.best == result.best and "measured end to end 2.000x" in kept.stop and kept.kept is None
    # a predicted gain within the noise is not timed at all: the choice cannot flip with timing noise
    unpredicted = SimpleNamespace(resolution=1 - result.best_us / result.original_us + 0.01,
                                  end_to_end_us=lambda a, b: pytest.fail("timed a gain within the noise"))
    held = keep_unresolved_gain(graph, result, unpredicted)
    assert held.best == graph and "input kept: predicted" in held.stop and held.kept.guard == "resolution"

    def broken(a, b):
        raise RuntimeError("[ONNXRuntimeError] : 1 : FAIL : cannot run it")

    decided = keep_unresolved_gain(graph, result, SimpleNamespace(resolution=0.02, end_to_end_us=broken))
    assert decided.best == graph and decided.best_us == result.original_us
    assert "input kept: the gain cannot be measured end to end ([ONNXRuntimeError]" in decided.stop
    assert decided.kept.guard == "unmeasurable" and decided.kept.why in decided.stop


def test_calibration_scales_prices_to_the_input_measured_end_to_end(fake, monkeypatch):
    """Kernels timed alone sum to another latency than the model's; calibrating on the input timed
    end to end scales every price so the input is priced at its measured time (less the run call),
    and the median gap between pairs of its timings raises the least gain a rewrite must promise."""
    graph = small_cnn()
    other = Graph((node("relu", graph.outputs[0]),))
    model = OrtCpuCost(progress=False)
    raw, raw_other = model.graph_time_us(graph), model.graph_time_us(other)
    # three pairs of the input against itself: the median mean (200) and the median difference (5%)
    medians = iter([205.0, 195.0, 300.0, 100.0, 199.0, 201.0])  # the second pair strays
    monkeypatch.setattr(ortcpu_module, "time_graph_sessions", lambda graphs, sessions, *a, **k: [
        [Timing(m, m, m, 24) for m in (next(medians) for _ in graphs)] for _ in range(sessions)])
    cal = model.calibrate(graph)
    assert cal.measured_us == 200.0 and cal.noise == pytest.approx(0.05) and cal.priced_us == raw + 5.0
    assert cal.scale == pytest.approx((200.0 - 5.0) / raw) and model.resolution == pytest.approx(0.05)
    assert model.latency_us(graph) == pytest.approx(200.0)
    assert model.graph_time_us(other) == pytest.approx(raw_other * cal.scale)  # the same choices, scaled
    assert "priced" in cal.summary() and cal.to_dict()["scale"] == cal.scale


def _timed_sessions(monkeypatch, pairs) -> list[int]:
    """Every end-to-end timing of ort-cpu answers the next of ``pairs`` (one timing per graph) in
    each of its sessions; the list returned records each timing's session count."""
    calls: list[int] = []

    def timed(graphs, sessions, *a, **k):
        calls.append(sessions)
        return [[Timing(us, us, us, 24) for us in next(pairs)] for _ in range(sessions)]

    monkeypatch.setattr(ortcpu_module, "time_graph_sessions", timed)
    return calls


def test_end_to_end_timings_are_recorded_so_a_repeated_run_decides_alike(fake, monkeypatch):
    """The calibration and the end-to-end check of a pick are database records: a second process
    reads them and times nothing, so it gets the same scale, the same resolution and the same
    verdict. The verdict is the median of three pairs of sessions, all timed together (one call):
    one pair that strays (here the pick timed 1% slower) does not decide against two that agree
    (4% faster)."""
    graph = small_cnn()
    pick = Graph((node("relu", graph.outputs[0]),))
    pairs = iter([(205.0, 195.0)] * 3 + [(100.0, 96.0), (100.0, 101.0), (100.0, 96.2)] + [(96.0, 100.0)] * 5)
    calls = _timed_sessions(monkeypatch, pairs)
    first = OrtCpuCost(progress=False)
    cal = first.calibrate(graph)
    assert first.end_to_end_us(graph, pick) == (100.0, 96.2)  # the median ratio of 1.042, 0.990, 1.040
    assert calls == [3, 3]  # one timing of three sessions per graph each
    new_process()
    again = OrtCpuCost(progress=False)
    assert again.calibrate(graph) == cal and again.resolution == first.resolution
    assert again.end_to_end_us(graph, pick) == (100.0, 96.2) and len(calls) == 2  # read, not timed
    # another pair: its own records; the prices favour the graph without the relu and the pairs show
    # no gain, so two pairs more are timed
    assert again.end_to_end_us(pick, graph) == (96.0, 100.0) and calls[2:] == [3, 2]


def test_pairs_that_contradict_a_priced_gain_are_timed_again(fake, monkeypatch):
    """Where the prices promise a gain beyond the resolution and the three pairs show none, two
    pairs more are timed (and recorded) and the median is taken over the five; a pick the prices
    do not favour is judged on three."""
    graph = small_cnn()
    cheap = Graph((node("relu", graph.leaves("input")[0]),))  # priced far below the whole network
    pairs = iter([(200.0, 200.0)] * 3 + [(100.0, 101.0), (100.0, 95.0), (100.0, 100.5)] + [(100.0, 95.0), (100.0, 94.0)]
                 + [(100.0, 101.0)] * 3)
    calls = _timed_sessions(monkeypatch, pairs)
    model = OrtCpuCost(progress=False)
    model.calibrate(graph)
    assert model.graph_time_us(graph) / model.graph_time_us(cheap) > 1 / (1 - model.resolution)
    assert model.end_to_end_us(graph, cheap) == (100.0, 95.0)  # ratios 0.990 0.995 1.053 1.053 1.064
    assert calls == [3, 3, 2]
    assert model.end_to_end_us(cheap, graph) == (100.0, 101.0) and calls == [3, 3, 2, 3]  # no gain promised


def test_timings_taken_together_are_timed_together_again(fake, tmp_path, monkeypatch):
    """A group of timings (one interleaved run) is read whole or timed whole: under contention its
    records are timed again, all of them, once the machine is quiet."""
    db = MeasurementDB(Context("m", "rt", 1), tmp_path / "g.jsonl")
    monkeypatch.setattr(database, "machine_load", lambda: (5.0, 2))
    with pytest.warns(UserWarning, match="timing under contention"):
        busy = db.measure_all(["g:0", "g:1"], lambda: [Timing(9.0, 9.0, 9.0, 1), Timing(8.0, 8.0, 8.0, 1)])
    assert [t.median_us for t in busy] == [9.0, 8.0]
    monkeypatch.setattr(database, "machine_load", lambda: (0.5, 2))
    new_process()
    db = MeasurementDB(Context("m", "rt", 1), tmp_path / "g.jsonl")
    quiet = db.measure_all(["g:0", "g:1"], lambda: [Timing(3.0, 3.0, 3.0, 1), Timing(2.0, 2.0, 2.0, 1)])
    assert [t.median_us for t in quiet] == [3.0, 2.0]
    assert db.measure_all(["g:0", "g:1"], lambda: pytest.fail("timed a group the database holds")) == quiet
    with pytest.raises(ValueError, match="2 keys timed together, 1 timings"):
        db.measure_all(["h:0", "h:1"], lambda: [Timing(1.0, 1.0, 1.0, 1)])


def test_a_model_that_cannot_run_end_to_end_is_priced_uncalibrated(fake, monkeypatch, capsys):
    def broken(graphs, *args, **kwargs):
        raise RuntimeError("[ONNXRuntimeError] : 10 : INVALID_GRAPH : a long reason " + "y" * 250)

    monkeypatch.setattr(ortcpu_module, "time_graph_sessions", broken)
    model = OrtCpuCost(progress=False)
    raw = model.graph_time_us(small_cnn())
    assert model.calibrate(small_cnn()) is None and model.calibration is None
    assert model.graph_time_us(small_cnn()) == raw and "not calibrated" in capsys.readouterr().err


def test_another_thread_count_is_another_context(fake, tmp_path):
    OrtCpuCost(progress=False).graph_time_us(small_cnn())
    new_process()
    with pytest.warns(UserWarning, match="another machine, runtime version or thread count"):
        two = MeasurementDB(Context.here(2), tmp_path / "db.jsonl")
    assert not two.timings


def test_both_searches_take_the_measured_model(fake):
    from experiments.searches import search_graph

    x = input_("x", (16, 64))
    graph = Graph(tuple(node("matmul", x, weight(f"w{k}", (64, 64))) for k in "qkv"), dtype="float32", name="qkv")
    for search in ("taso", "eqsat"):
        row, best = search_graph(graph, "qkv", search, cost_model(OrtCpuCost(progress=False, resolution=0.0)),
                                 quick=True)
        assert row["device"] == "ort-cpu" and row["verified"]
        assert row["best_us"] <= row["original_us"]
        assert row["best_us"] == pytest.approx(cost_model("ort-cpu").graph_time_us(best))
    # the fake charges 30 µs per product and 10 µs per split: merged products pay
    assert row["best_us"] < row["original_us"]


def test_a_real_kernel_is_timed_in_onnxruntime(tmp_path, monkeypatch):
    monkeypatch.setenv("EQSAT_LAB_MEASUREMENTS", str(tmp_path / "db.jsonl"))
    model = OrtCpuCost(progress=False, warmup=2, runs=5)
    x = input_("x", (1, 16, 16, 16))
    conv = node("conv2d", x, weight("w", (16, 16, 3, 3)), pad="same")
    t = model.timing(node_kernel(conv))
    assert t.runs >= 5 and 0 < t.p10_us <= t.median_us <= t.p90_us
    assert model.node_time_us(conv) == pytest.approx(max(t.median_us - model.overhead_us, 0.0))
    report = model.report(Graph((conv,)))
    assert report.device == "ort-cpu" and report.rows[-1].kind == "measured"


def test_a_kernel_onnxruntime_cannot_run_is_priced_by_a_stated_estimate_and_stores_nothing(fake, monkeypatch,
                                                                                          tmp_path, capsys):
    """The model is never refused: the kernel is priced at the roofline of its bytes and FLOPs on a
    CPU profile, the report names it an estimate, and onnxruntime's whole message is shown."""
    long_tail = "x" * 300

    def broken(graph, *args, **kwargs):
        if graph.name == "overhead":
            return Timing(5.0, 5.0, 5.0, 8)
        raise RuntimeError(f"[ONNXRuntimeError] : 2 : INVALID_ARGUMENT : indices out of bounds\nmore {long_tail}")

    monkeypatch.setattr(ortcpu_module, "time_graph", broken)
    model = OrtCpuCost(progress=False)
    graph = small_cnn()
    assert model.graph_time_us(graph) > 0
    conv = graph.outputs[0].inputs[0]
    expected = ortcpu_module.estimate_us(node_kernel(conv), 1)
    assert expected > 0 and model.node_time_us(conv) == pytest.approx(expected)
    assert {r.kind for r in model.report(graph).rows if r.op in ("conv2d", "relu", "ewadd")} == {"estimate"}
    err = capsys.readouterr().err
    assert "the kernel conv2d is priced by an estimate" in err and f"indices out of bounds more {long_tail}" in err
    model.graph_time_us(graph)
    assert err.count("is priced by an estimate") == len(model.estimated) == 4  # each kernel once: two convs, two fused
    assert capsys.readouterr().err == ""
    assert not (tmp_path / "db.jsonl").exists() or "conv2d" not in (tmp_path / "db.jsonl").read_text()


def test_products_reading_weights_are_timed_with_cold_weights(fake, monkeypatch):
    """Timed alone, a kernel's 40 runs read the same weights from cache; in an inference a
    product's weights were last read one inference ago. So a product reading a weight (fused or
    not) is timed after the caches are evicted, under a key of its own; a product of two
    activations and a convolution are timed warm."""
    from eqsat.cost.measured import timer

    weighted = op_kernel("matmul", (), ((16, 64), (64, 32)), (False, True))
    plain = op_kernel("matmul", (), ((16, 64), (64, 32)), (False, False))
    conv = op_kernel("conv2d", (("pad", "same"),), ((1, 8, 8, 8), (8, 8, 3, 3)), (False, True))
    assert weighted.cold_weights and not plain.cold_weights and not conv.cold_weights
    assert weighted.key != op_kernel("matmul", (), ((16, 64), (64, 32)), (True, True)).key
    assert "cold-weights" in weighted.key and "cold-weights" not in plain.key
    cost = OrtCpuCost(progress=False)
    for k in (weighted, plain, conv):
        cost.kernel_us(k)
    timed = [cold for name, cold in zip(fake.calls, fake.cold) if name != "overhead"]
    assert timed == [True, False, False]
    evicted = []
    monkeypatch.setattr(timer, "evict_caches", lambda feeds: evicted.append(sorted(feeds)))
    feeds = {"x0": __import__("numpy").ones((2, 2), dtype="float32")}
    sess = SimpleNamespace(run=lambda outputs, f: None)
    timer.run_us(sess, feeds)
    timer.run_us(sess, feeds, cold_weights=True)
    assert evicted == [["x0"]]


def test_graphs_timed_end_to_end_are_exported_once_and_slow_ones_run_fewer_times(tmp_path, monkeypatch):
    """The calibration times the input against itself in three pairs of sessions, all in one
    interleaved timing: one export serves all six sessions (and the pick's check after the search),
    and with ``max_seconds`` spent each session stops at ``E2E_MIN_RUNS`` runs instead of 24."""
    pytest.importorskip("onnxruntime")
    from eqsat.cost.measured import timer

    exported: list[str] = []
    real = timer.export_for_timing
    monkeypatch.setattr(timer, "export_for_timing", lambda g, path, **k: exported.append(g.digest) or real(g, path, **k))
    g = Graph((node("relu", input_("x", (4, 8))),), name="g")
    exports: dict = {}
    for seed in range(2):
        rows = timer.time_graph_sessions([g, g], 3, seed=seed, exports=exports, folder=tmp_path, max_seconds=0.0,
                                         min_seconds=0.0)
        assert len(rows) == 3 and all(a.runs == b.runs == timer.E2E_MIN_RUNS for a, b in rows)
    assert exported == [g.digest]
    ((c,),) = timer.time_graph_sessions([g], 1, runs=40, min_seconds=0.0)  # no time limit reached: the runs asked for
    assert c.runs >= 40


def test_a_timing_export_keeps_large_weights_in_a_data_file_beside_it(tmp_path):
    """An end-to-end timing's export writes the weights' data to ``<file>.data`` (onnxruntime maps
    it: a session then holds no copy of them), and the model computes what the inline export does."""
    pytest.importorskip("onnxruntime")
    import numpy as np

    from eqsat.cost.measured import timer
    from eqsat.ir.graph import weight

    g = Graph((node("matmul", input_("x", (2, 128)), weight("w", (128, 64))),), name="mm")
    inline = timer.export_for_timing(g, tmp_path / "inline.onnx")
    external = timer.export_for_timing(g, tmp_path / "external.onnx", external_data=True)
    assert (tmp_path / "external.onnx.data").stat().st_size == 128 * 64 * 4
    assert external.stat().st_size < 4096 < inline.stat().st_size
    feeds = {"x": np.ones((2, 128), dtype=np.float32)}
    a, b = (timer.session(p, 1).run(None, feeds)[0] for p in (inline, external))
    assert np.array_equal(a, b)
