"""The builder/runner plumbing of real-kernel targets, with a fake compiler (no TVM needed)."""
from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from autotune.measure import best_from_records
from autotune.space import SPACE, Config, Space
from autotune.tvm.compiled import CompiledMeasurer
from autotune.workload import Workload


class FakeCompiler:
    """A target whose artifacts are JSON files: block_m 16 fails to build, block_m 32 builds forever,
    block_n 16 computes a wrong result, num_warps 32 hangs at run time; otherwise the time is a
    function of the config (smaller block_k is faster)."""

    name = "fake-cc"

    def machine(self) -> str:
        return "test-machine"

    def space(self, workload: Workload) -> Space:
        return SPACE

    def build(self, workload: Workload, config: Config, folder: str) -> str:
        if config.block_m == 16:
            raise RuntimeError("register allocation failed")
        if config.block_m == 32:
            time.sleep(30)
        path = Path(folder) / f"{abs(hash(config.as_tuple()))}.json"
        path.write_text(json.dumps(config.as_dict()))
        return str(path)

    def run(self, workload: Workload, artifact: str, repeats: int, cutoff_us: float) -> float:
        config = json.loads(Path(artifact).read_text())
        if config["block_n"] == 16:
            raise ValueError("max difference 3.5 against numpy")
        if config["num_warps"] == 32:
            time.sleep(30)
        return 10.0 * config["block_k"]


def cfg(**kw) -> Config:
    base = dict(split_k=1, block_m=64, block_n=64, block_k=32, num_warps=4, num_stages=2, group_m=1)
    return Config(**(base | kw))


@pytest.fixture(scope="module")
def measured(tmp_path_factory):
    records = tmp_path_factory.mktemp("compiled") / "records.jsonl"
    m = CompiledMeasurer(FakeCompiler(), records, build_workers=2, build_timeout_s=3, run_timeout_s=3, repeats=3)
    configs = [cfg(), cfg(block_k=16), cfg(block_m=16), cfg(block_m=32), cfg(block_n=16), cfg(num_warps=32)]
    try:
        results = m.measure(Workload(64, 64, 64), configs)
    finally:
        m.close()
    return records, configs, results, m


def test_builds_and_runs_give_times_and_every_failure_is_a_record_with_its_error(measured):
    records, configs, results, m = measured
    assert [r.time_us for r in results[:2]] == [320.0, 160.0] and all(r.ok for r in results[:2])
    errors = [r.error for r in results[2:]]
    assert errors[0].startswith("build error: RuntimeError: register allocation failed")
    assert errors[1].startswith("build timeout")
    assert errors[2].startswith("run error: ValueError: max difference")
    assert errors[3].startswith("run timeout")
    rows = [json.loads(line) for line in records.read_text().splitlines()]
    assert len(rows) == 6 and {r["target"] for r in rows} == {"fake-cc"} and {r["machine"] for r in rows} == {
        "test-machine"}
    assert all("loadavg" in r for r in rows) and rows[2]["time_us"] is None and rows[2]["error"]


def test_a_resumed_run_replays_the_records_and_best_from_records_reads_them(measured):
    records, configs, results, _ = measured
    again = CompiledMeasurer(FakeCompiler(), records)
    try:
        replayed = again.measure(Workload(64, 64, 64), configs[:3])
    finally:
        again.close()
    assert again.measured == 0 and [r.time_us for r in replayed[:2]] == [320.0, 160.0]
    assert best_from_records(records, Workload(64, 64, 64)) == (cfg(block_k=16), 160.0)


def test_bad_settings_are_refused():
    with pytest.raises(ValueError, match="cutoff"):
        CompiledMeasurer(FakeCompiler(), None, cutoff=1.0)


def test_tvm_llvm_builds_runs_and_checks_a_real_kernel(tmp_path):
    """With the '.[tvm]' extra: two configs of a 64x64x64 matmul compiled by TVM for this CPU,
    checked against numpy and timed; skipped without TVM (CI does not install it)."""
    pytest.importorskip("tvm")
    from autotune.tvm.target import TvmLlvmTarget

    m = CompiledMeasurer(TvmLlvmTarget(threads=1), tmp_path / "r.jsonl", build_workers=1, repeats=3)
    try:
        results = m.measure(Workload(64, 64, 64), [cfg(), cfg(split_k=2, group_m=2, num_warps=8)])
    finally:
        m.close()
    assert all(r.ok and 0 < r.time_us < 1e5 for r in results), [r.error for r in results]
    assert json.loads((tmp_path / "r.jsonl").read_text().splitlines()[0])["target"] == "tvm-llvm"


KIND_SHAPES = ("40x24x72", "bmm3:40x24x16", "conv3x3:2x7x8x24", "conv3x3:1x56x8x64")
KIND_CONFIGS = (cfg(), cfg(split_k=2, block_m=16, block_n=32, block_k=16, num_warps=2, num_stages=1, group_m=2),
                cfg(split_k=4, block_m=256, block_n=256, block_k=256, num_warps=32, num_stages=7, group_m=32),
                cfg(split_k=2, block_m=64, block_n=64, block_k=16, num_warps=16, num_stages=1, group_m=8))
# the last one computed garbage on the 56x56 conv when a conv used the local accumulator


def test_workload_kinds_parse_and_bad_ones_are_named():
    from autotune.workload import get_workload

    conv = get_workload("conv3x3:1x56x64x64")
    assert (conv.M, conv.N, conv.K, conv.batch, conv.image) == (3136, 64, 576, 1, (1, 56, 64, 64))
    assert conv.flops == 2 * 56 * 56 * 64 * 64 * 9 and conv.key == "conv3x3_3136x64x576"
    bmm = get_workload("bmm8:256x256x256")
    assert bmm.flops == 8 * 2 * 256**3 and bmm.key == "bmm8_256x256x256"
    assert get_workload("512x512x512").key == "matmul_512x512x512"  # old records keep their key
    with pytest.raises(ValueError, match="conv3x3:NxHxCxF"):
        get_workload("conv3x3:1x56x64")
    with pytest.raises(ValueError, match="square images"):
        Workload(50, 8, 18, kind="conv3x3")


def test_the_conv_reference_is_a_convolution():
    """The numpy reference every conv build is checked against, against a direct loop nest."""
    import numpy as np

    from autotune.tvm.kernels import KERNELS, inputs
    from autotune.workload import get_workload

    w = get_workload("conv3x3:2x5x3x4")
    x, k = inputs(w, seed=1)
    got = KERNELS["conv3x3"].reference(w, [x, k])
    pad = np.pad(x.astype(np.float64), ((0, 0), (1, 1), (1, 1), (0, 0)))
    want = np.zeros((2, 5, 5, 4))
    for n, y, z, f in np.ndindex(want.shape):
        want[n, y, z, f] = (pad[n, y:y + 3, z:z + 3, :] * k[:, :, :, f]).sum()
    assert got.shape == KERNELS["conv3x3"].output(w) and np.allclose(got, want)


@pytest.mark.parametrize("shape", KIND_SHAPES)
def test_tvm_llvm_kernels_of_every_kind_match_numpy(tmp_path, shape):
    """With the '.[tvm]' extra: each kind's builder under three configs (tiles that divide the
    shape and tiles that do not), compiled, run and checked against numpy (``run`` raises on a
    wrong result)."""
    pytest.importorskip("tvm")
    from autotune.tvm.target import TvmLlvmTarget
    from autotune.workload import get_workload

    target, w = TvmLlvmTarget(threads=1), get_workload(shape)
    for config in KIND_CONFIGS:
        assert 0 < target.run(w, target.build(w, config, str(tmp_path)), 1, float("inf")) < 1e6


@pytest.mark.parametrize("shape", KIND_SHAPES + ("bmm2:32x48x96",))
def test_tvm_llvm_configs_of_the_restricted_space_match_numpy(tmp_path, shape):
    """With the '.[tvm]' extra: seeded configs the tuners may propose on this CPU (packed right
    operand, register tile, k unroll; k tiles below K and the whole K) compiled, run and checked
    against numpy for each kind."""
    pytest.importorskip("tvm")
    import numpy as np

    from autotune.resources import allowed
    from autotune.tvm.target import TvmLlvmTarget
    from autotune.workload import get_workload

    target, w = TvmLlvmTarget(threads=1), get_workload(shape)
    space = target.space(w)
    pool = space.values(np.flatnonzero(allowed(space, space.all_values())))
    k_tiled = pool[:, 3] < w.K
    rng = np.random.default_rng(0)
    picks = [pool[rng.choice(np.flatnonzero(side))] for side in (k_tiled, ~k_tiled) if side.any()]
    for values in picks:
        config = Config(*(int(v) for v in values))
        assert 0 < target.run(w, target.build(w, config, str(tmp_path)), 1, float("inf")) < 1e6, config


def test_metaschedule_is_a_tuner_row_that_refuses_what_it_cannot_tune(monkeypatch):
    """MetaSchedule searches TVM's schedules: no knob-space session, only the tvm-llvm target, and
    without the extra a clear message (CI has no TVM; here TVM is hidden to check that path too)."""
    import sys

    from autotune.registry import OWN_SPACE_TUNERS, make_tuner
    from autotune.tvm.budgets import checkpoints

    ms = make_tuner("metaschedule")
    assert ms.own_space and "metaschedule" in OWN_SPACE_TUNERS
    with pytest.raises(ValueError, match="own schedules"):
        ms.tune(Workload(64, 64, 64), 8, None)
    m = CompiledMeasurer(FakeCompiler(), None)
    with pytest.raises(ValueError, match="needs the tvm-llvm target"):
        checkpoints("metaschedule", Workload(64, 64, 64), [8], m)

    class NoTvm:
        threads, name = 1, "tvm-llvm"

        def function(self, workload):
            raise AssertionError("never reached without TVM")

    monkeypatch.setitem(sys.modules, "tvm", None)
    m.target = NoTvm()
    with pytest.raises(ValueError, match=r"optional extra: pip install '\.\[tvm\]'"):
        checkpoints("metaschedule", Workload(64, 64, 64), [8], m)


class QuickFake:
    """A compiler whose kernels take a time set by the config (block_k 256 fails to build)."""

    name = "quick-fake"

    def machine(self) -> str:
        return "test-machine"

    def space(self, workload: Workload) -> Space:
        return SPACE

    def build(self, workload: Workload, config: Config, folder: str) -> str:
        if config.block_k == 256:
            raise RuntimeError("out of registers")
        path = Path(folder) / f"{abs(hash((workload.key, config.as_tuple())))}.json"
        path.write_text(json.dumps(config.as_dict()))
        return str(path)

    def run(self, workload: Workload, artifact: str, repeats: int, cutoff_us: float) -> float:
        c = json.loads(Path(artifact).read_text())
        return workload.flops / 1e4 / (c["block_m"] * c["num_warps"]) + c["block_k"]


def test_the_tvm_llvm_experiment_quick_mode_runs_on_a_fake_compiler(tmp_path, monkeypatch, capsys):
    """The experiment row end to end without TVM: every tuner at the quick budgets, bests
    re-measured, MetaSchedule a row saying why it was skipped, the table, curve and verdicts
    written, and a second run reads every cell back."""
    from autotune.tvm import compiled
    from experiments.cli import main

    monkeypatch.setitem(compiled.TARGETS, "quick-fake", lambda threads: QuickFake())
    argv = ["experiment", "tvm-llvm", "--quick", "--target", "quick-fake", "--tuners", "random,metaschedule",
            "--out", str(tmp_path)]
    assert main(argv) == 0
    rows = json.loads((tmp_path / "tvm_llvm.json").read_text())["rows"]
    measured = [r for r in rows if not r["skipped"]]
    assert {(r["tuner"], r["trials"]) for r in measured} == {(t, n) for t in ("random",) for n in (8, 16)}
    assert len({r["shape"] for r in measured}) == 3 and all(r["best_gflops"] > 0 and r["wall_s"] > 0 for r in measured)
    assert all(r["loadavg_start"] >= 0 and r["openblas_gflops"] is None for r in measured)  # no BLAS on a fake
    skipped = [r for r in rows if r["skipped"]]
    assert len(skipped) == 6 and all("tvm-llvm target" in r["skipped"] or "'.[tvm]'" in r["skipped"]
                                     for r in skipped)
    assert (tmp_path / "tvm_llvm.png").stat().st_size > 0 and "@16: ours" in (tmp_path / "tvm_llvm.md").read_text()
    records = list((tmp_path / "records").glob("random-*.jsonl"))
    assert len(records) == 3 and all(json.loads(line)["target"] == "quick-fake"
                                     for f in records for line in f.read_text().splitlines())
    # --finished-only: the table of what has run; a tuner that has not is a row saying so, and nothing tunes
    assert main(argv[:-4] + ["--tuners", "random,ansor", "--out", str(tmp_path), "--finished-only"]) == 0
    rows = json.loads((tmp_path / "tvm_llvm.json").read_text())["rows"]
    assert {r["tuner"] for r in rows if not r["skipped"]} == {"random"}
    assert sum("not run yet" in r["skipped"] for r in rows if r["tuner"] == "ansor") == 3
    assert not list((tmp_path / "records").glob("ansor-*"))
    capsys.readouterr()
    assert main(argv) == 0 and "skipped" in capsys.readouterr().out  # resumed: every cell read back


def test_the_tvm_llvm_experiment_refuses_an_unknown_target_in_one_sentence(tmp_path):
    from experiments.cli import main

    assert main(["experiment", "tvm-llvm", "--quick", "--target", "cuda", "--out", str(tmp_path)]) == 2
    assert not any(tmp_path.iterdir())


def test_tune_refuses_a_conv_on_a_matmul_measurer_in_one_sentence(capsys):
    from experiments.cli import main

    assert main(["tune", "--shape", "conv3x3:1x8x8x8", "--trials", "4"]) == 2
    assert "compiles only on --measurer tvm-llvm" in capsys.readouterr().err


def test_the_tvm_llvm_experiment_names_a_bad_budget_list(tmp_path, capsys):
    from experiments.cli import main

    with pytest.raises(SystemExit) as exit_:
        main(["experiment", "tvm-llvm", "--trials", "abc", "--out", str(tmp_path)])
    assert exit_.value.code == 2 and "--trials" in capsys.readouterr().err


def test_the_openblas_reference_runs_in_a_child_with_the_kernels_thread_count(monkeypatch):
    """The CLI process keeps one BLAS thread (experiments/blas.py); the reference must not inherit it."""
    import subprocess

    from autotune.tvm.target import openblas_us
    from autotune.workload import get_workload

    seen = {}
    real = subprocess.run

    def spy(cmd, **kw):
        seen["threads"] = kw["env"]["OPENBLAS_NUM_THREADS"]
        return real(cmd, **kw)

    monkeypatch.setattr(subprocess, "run", spy)
    us = openblas_us(get_workload("64x64x64"), repeats=3, threads=2)
    assert seen["threads"] == "2" and us is not None and us > 0
    assert openblas_us(get_workload("conv3x3:1x8x8x8")) is None  # no single BLAS call for a conv


def test_a_contended_run_re_measures_each_budgets_top_configs_and_says_so(monkeypatch, tmp_path):
    """The load moving by more than 20% marks the measurer contended; then every budget's three
    best configs are re-measured (the fastest re-measured is the best) and the checkpoint says so."""
    import itertools
    import os

    from autotune.tvm.budgets import TOP_K, checkpoints

    w = Workload(64, 64, 64)
    for loads, contended in (((1.0,), False), ((1.0, 1.1), False), ((1.0, 1.5), True)):
        cycle = itertools.cycle(loads)
        monkeypatch.setattr(os, "getloadavg", lambda cycle=cycle: (next(cycle), 0.0, 0.0))
        m = CompiledMeasurer(QuickFake(), None)
        calls: list[Config] = []
        remeasure = m.remeasure
        m.remeasure = lambda workload, config, remeasure=remeasure, calls=calls: (
            calls.append(config), remeasure(workload, config))[1]
        try:
            points = checkpoints("random", w, [8, 16], m, seed=3)
        finally:
            m.close()
        assert m.contended == contended and all(p.contended == contended for p in points)
        assert len(calls) == (2 * TOP_K if contended else 2), (loads, calls)
        for p in points:  # the best is the fastest of the re-measured configs
            assert p.best and p.loadavg in loads and p.remeasured_us == min(
                QuickFake().run(w, QuickFake().build(w, c, str(tmp_path)), 1, 0.0) for c in calls[:TOP_K if contended else 1])
            calls = calls[TOP_K if contended else 1:]



def test_tune_on_a_compiled_target_runs_any_tuner_row_through_its_checkpoint(monkeypatch, tmp_path, capsys):
    """``eqsat-lab tune --measurer tvm-llvm`` (here on a fake compiler): a knob tuner's best
    re-measured against OpenBLAS, written as JSON; MetaSchedule goes through the same path and,
    on a target TVM does not compile, fails in one sentence."""
    from autotune import registry
    from experiments.cli import main

    monkeypatch.setitem(registry.MEASURERS, "tvm-llvm", lambda seed, records: CompiledMeasurer(QuickFake(), records))
    out = tmp_path / "t.json"
    assert main(["tune", "--measurer", "tvm-llvm", "--tuner", "random", "--shape", "64x64x64", "--trials", "8",
                 "--json", str(out)]) == 0
    got = json.loads(out.read_text())
    assert got["trials_run"] == 8 and got["best_gflops"] > 0 and got["openblas_gflops"] > 0 and got["best"]
    assert "GFLOP/s (OpenBLAS" in capsys.readouterr().out
    assert main(["tune", "--measurer", "tvm-llvm", "--tuner", "metaschedule", "--shape", "64x64x64",
                 "--trials", "8"]) == 2
    assert "needs the tvm-llvm target" in capsys.readouterr().err


def test_measurers_are_registry_rows_beside_the_tuners(monkeypatch):
    """A measurer is a row of :data:`autotune.registry.MEASURERS`: an unknown name is one sentence
    listing the rows, and tvm-llvm without TVM names the extra."""
    import sys

    from autotune.registry import MEASURERS, make_measurer

    assert make_measurer("hypogpu", seed=1).name == "hypogpu" and {"hypogpu", "cpu", "tvm-llvm"} <= set(MEASURERS)
    with pytest.raises(ValueError, match="unknown measurer 'gpu'; choose from hypogpu, cpu, tvm-llvm"):
        make_measurer("gpu")
    monkeypatch.setitem(sys.modules, "tvm", None)
    with pytest.raises(ValueError, match=r"measurer tvm-llvm needs the optional extra: pip install '\.\[tvm\]'"):
        make_measurer("tvm-llvm")
