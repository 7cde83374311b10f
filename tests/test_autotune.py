"""Autotune foundation: the space, HypoGPU's landscape, the measurer and records, the tuners."""
from __future__ import annotations

import json
import statistics

import numpy as np
import pytest

from autotune import hypogpu
from autotune.cpu import CpuMeasurer
from autotune.evaluate import curves, evaluate, fraction_after
from autotune.landscape import (
    best_stages,
    cross_shape,
    dynamic_m,
    off_diagonal,
    slide_configs_on,
    stages_vs_block_k,
    summary,
)
from autotune.measure import SimulatedMeasurer, best_from_records, read_records
from autotune.minitriton import check
from autotune.resources import legal, smem_bytes
from autotune.space import KNOBS, SPACE, Config
from autotune.tuners import TRITON_SLIDE_CONFIGS, GridSearch, RandomSearch, TritonAutotune
from autotune.workload import SHAPES, Workload, get_workload
from experiments.cli import main


# ----------------------------------------------------------------------------- space
def test_space_has_157500_configs_and_round_trips():
    assert len(SPACE) == 157_500 == int(np.prod([len(k.values) for k in KNOBS]))
    for i in (0, 1, 12_345, 157_499):
        assert SPACE.index(SPACE.config(i)) == i
    assert SPACE.values(np.arange(len(SPACE))).shape == (157_500, 7)


def test_neighbours_move_one_knob_one_step():
    i = SPACE.index(Config(4, 64, 64, 32, 4, 3, 8))
    for j in SPACE.neighbours(i):
        a, b = SPACE.digits(i)[0], SPACE.digits(j)[0]
        assert np.abs(a - b).sum() == 1
    assert len(SPACE.neighbours(i)) == 14  # every knob has both neighbours here
    rng = np.random.default_rng(0)
    idx = rng.integers(0, len(SPACE), 500)
    moved = SPACE.random_neighbours(idx, rng)
    assert (np.abs(SPACE.digits(idx) - SPACE.digits(moved)).sum(axis=1) == 1).all()


def test_bad_configs_and_shapes_are_named():
    with pytest.raises(ValueError, match="block_m"):
        Config(1, 48, 64, 32, 4, 2, 8)
    with pytest.raises(ValueError, match="M must be"):
        Workload(0, 4, 4)
    with pytest.raises(ValueError, match="unknown shape"):
        get_workload("huge")
    assert get_workload("64x32x16+relu") == Workload(64, 32, 16, "relu", "64x32x16+relu")


# ----------------------------------------------------------------------------- the landscape (docs/reference.md)
def test_half_of_the_slide_configs_exceed_shared_memory():
    arr = np.array([c.as_tuple() for c in TRITON_SLIDE_CONFIGS])
    assert len(arr) == 24
    too_big = smem_bytes(arr) > 163 * 1024
    assert too_big.sum() == 12 and (~legal(arr)).sum() == 12
    assert sorted(set(smem_bytes(arr)[too_big] // 1024)) == [192, 256, 288, 384]


def test_square_landscape_good_configs_are_rare():
    s = summary(SHAPES["square"])
    assert 80_000 < s.legal < 120_000
    assert s.median_slowdown > 3.0          # reference: 5x
    assert 10 <= s.within_5pct <= 60         # reference: 24


def test_best_stages_move_with_block_k():
    assert {k: v for k, v in best_stages(stages_vs_block_k(SHAPES["square"])).items() if k <= 128} == \
        {16: 3, 32: 2, 64: 2, 128: 1}


def test_slide_configs_fail_decode_and_wgrad_which_needs_split_k():
    rows = {r.workload: r for r in slide_configs_on([SHAPES[n] for n in ("square", "decode", "wgrad")])}
    assert rows["square"].slowdown < 1.1
    assert rows["decode"].slowdown > 2.5
    assert rows["wgrad"].slowdown > 3.5 and rows["wgrad"].optimum.startswith("sk16")


def test_best_configs_do_not_transfer_across_shapes():
    off = off_diagonal(cross_shape([SHAPES[n] for n in ("square", "prefill", "decode", "wgrad", "ffn_down")]))
    assert min(off) < 1.15 and max(off) > 5.0 and 1.8 < statistics.median(off) < 3.5  # reference: 1.06-6.66, 2.35


def test_dynamic_m_moves_the_best_block_m():
    rows = dynamic_m()
    assert [r.best_block_m for r in rows][:5] == [16] * 5
    assert rows[-1].best_block_m >= 64
    assert rows[-1].with_m16_config_us / rows[-1].optimum_us > 2.5  # reference: 3.05x


def test_the_model_is_vectorized_and_deterministic():
    w = SHAPES["prefill"]
    idx = np.random.default_rng(3).integers(0, len(SPACE), 300)
    batch = hypogpu.time_us(w, SPACE.values(idx))
    one = [hypogpu.time_us(w, SPACE.values(int(i)))[0] for i in idx[:20]]
    assert np.array_equal(batch[:20], one)
    finite = batch[np.isfinite(batch)]
    assert (finite > 0).all() and np.isinf(batch[~legal(SPACE.values(idx))]).all()


# ----------------------------------------------------------------------------- measurer and records
def test_measurer_charges_compile_time_adds_noise_and_reports_errors(tmp_path):
    m = SimulatedMeasurer(seed=1, records=tmp_path / "r.jsonl")
    w = SHAPES["square"]
    good, bad = Config(1, 128, 128, 64, 8, 2, 8), Config(1, 128, 256, 128, 8, 4, 8)
    r1, r2, r3 = m.measure(w, [good, bad, good])
    assert r2.error.startswith("out of resources") and r2.time_us == float("inf")
    true = m.true_time_us(w, good)
    assert r1.time_us != r3.time_us and abs(r1.time_us / true - 1) < 0.06
    assert m.clock_s == pytest.approx(3.0 + 2 * 100 * true * 1e-6, rel=1e-6)  # 1 s compile each, 100 runs each
    recs = read_records(tmp_path / "r.jsonl")
    assert len(recs) == 3 and recs[1]["error"] and recs[0]["workload"] == w.key
    assert best_from_records(tmp_path / "r.jsonl", w)[0] == good
    assert best_from_records(tmp_path / "r.jsonl", SHAPES["decode"]) is None


def test_noise_is_about_one_and_a_half_percent():
    m = SimulatedMeasurer(seed=0)
    c = Config(1, 128, 128, 64, 8, 2, 8)
    w = SHAPES["square"]
    rel = np.array([r.time_us for r in m.measure(w, [c] * 400)]) / m.true_time_us(w, c) - 1
    assert abs(rel.mean()) < 0.003 and 0.012 < rel.std() < 0.018


def test_resuming_from_records_repeats_no_measurement(tmp_path):
    path = tmp_path / "run.jsonl"
    w = SHAPES["decode"]
    first = RandomSearch().tune(w, 40, SimulatedMeasurer(seed=5, records=path), seed=5)
    lines = path.read_text().splitlines()
    path.write_text("\n".join(lines[:25]) + "\n")  # the run was interrupted after 25 measurements
    again = SimulatedMeasurer(seed=5, records=path)
    second = RandomSearch().tune(w, 40, again, seed=5)
    assert again.measured == 15
    assert [r.time_us for r in second.history] == [r.time_us for r in first.history]
    assert len(read_records(path)) == 40


def test_a_malformed_record_is_skipped_with_a_warning_naming_the_line(tmp_path):
    path = tmp_path / "bad.jsonl"
    path.write_text('{"workload": "x", "config": {"split_k": 1}}\n')
    with pytest.warns(UserWarning, match="bad.jsonl: 1 invalid record.*line 1"):
        assert read_records(path) == []


# ----------------------------------------------------------------------------- tuners
def test_triton_autotune_measures_each_key_once_and_prunes():
    auto = TritonAutotune(key=("M", "N", "K"))
    m = SimulatedMeasurer(seed=0)
    first = auto.tune(SHAPES["square"], measurer=m)
    assert len(first.history) == 24 and m.measured == 24 and sum(not r.ok for r in first.history) == 12
    again = auto.tune(SHAPES["square"], measurer=m)
    assert again.cached and m.measured == 24 and again.best == first.best
    auto.tune(SHAPES["decode"], measurer=m)
    assert m.measured == 48
    pruned = TritonAutotune(prune_configs_by=lambda cs, w: [c for c in cs if c.num_stages == 2])
    assert len(pruned.tune(SHAPES["square"], measurer=SimulatedMeasurer()).history) == 8


def test_random_beats_grid_and_gets_close_with_1024_trials():
    w = [SHAPES["square"]]
    rand = curves(RandomSearch, "random", w, (64, 256, 1024), range(5))
    grid = curves(GridSearch, "grid", w, (64, 256, 1024), range(5))
    assert [p.median_pct for p in rand] == sorted(p.median_pct for p in rand)
    assert rand[-1].median_pct > 90 and all(g.median_pct < r.median_pct for g, r in zip(grid, rand))


def test_tune_result_is_judged_by_true_time_of_the_measured_best():
    r = RandomSearch().tune(SHAPES["small"], 64, SimulatedMeasurer(seed=2), seed=2)
    ev = evaluate(r)
    assert 0 < ev["fraction_of_optimum"] <= 1.0
    assert ev["fraction_of_optimum"] == pytest.approx(fraction_after(r, 64))


# ----------------------------------------------------------------------------- real kernels
def test_minitriton_configs_change_only_rounding():
    configs = [Config(1, 64, 64, 32, 4, 2, 1), Config(4, 32, 64, 16, 4, 2, 8), Config(2, 16, 256, 128, 4, 1, 4)]
    errs = [a.max_rel_error for a in check(configs)]
    assert all(1e-4 < e < 1e-3 for e in errs)  # FP16 output rounding (reference: 3.8e-4)


def test_cpu_measurer_tunes_a_real_kernel_faster_than_a_naive_default():
    w = get_workload("192x192x192")
    m = CpuMeasurer(seed=0, repeats=2)
    naive = m.measure(w, [Config(1, 16, 16, 16, 4, 2, 1)])[0].time_us
    tuned = RandomSearch(skip_illegal=False).tune(w, 24, m, seed=0).best.time_us
    assert tuned < naive / 3


# ----------------------------------------------------------------------------- CLI
def test_tune_cli_reports_fraction_of_optimum(tmp_path, capsys):
    out = tmp_path / "t.json"
    assert main(["tune", "--shape", "decode", "--tuner", "random", "--trials", "64", "--seed", "3",
                 "--json", str(out), "--records", str(tmp_path / "r.jsonl")]) == 0
    data = json.loads(out.read_text())
    assert {"optimum_us", "best_true_us", "fraction_of_optimum"} <= set(data)
    assert data["optimum_us"] <= data["best_true_us"] and data["trials"] == 64
    assert "% of optimum" in capsys.readouterr().out
    assert main(["tune", "landscape", "--shape", "square", "--json", str(tmp_path / "l.json")]) == 0
    assert json.loads((tmp_path / "l.json").read_text())["slide_configs"][0]["illegal"] == 12


def test_reselect_re_measures_the_finalists(capsys):
    from autotune.tuners import reselect

    m = SimulatedMeasurer(seed=3)
    r = RandomSearch().tune(SHAPES["decode"], 64, m, seed=3)
    before = m.measured
    chosen = reselect(r, m, top_k=4, repeats=5)
    assert m.measured == before + 20
    assert chosen in {x.config for x in sorted((x for x in r.history if x.ok), key=lambda x: x.time_us)[:4]}
    assert main(["tune", "--shape", "decode", "--trials", "32", "--reselect", "3"]) == 0
    assert "re-measured the top 3" in capsys.readouterr().out


def test_a_torn_last_record_is_dropped_with_a_warning_and_the_run_resumes(tmp_path):
    """A kill while appending leaves a torn last line: resume skips it (with a warning, keeping it in
    the file) and measures that config again; a corrupt line in the middle is skipped the same way."""
    from autotune.measure import SimulatedMeasurer, read_records
    from autotune.space import SPACE
    from autotune.workload import SHAPES

    path = tmp_path / "run.jsonl"
    configs = [SPACE.config(i) for i in range(0, 4000, 1000)]
    first = SimulatedMeasurer(seed=3, records=path).measure(SHAPES["decode"], configs)
    text = path.read_text()
    path.write_text(text[: len(text) - 25])  # the last record cut mid-line
    with pytest.warns(UserWarning, match="1 invalid record"):
        again = SimulatedMeasurer(seed=3, records=path)
        resumed = again.measure(SHAPES["decode"], configs)
    assert [r.time_us for r in resumed] == [r.time_us for r in first] and again.measured == 1
    with pytest.warns(UserWarning, match="1 invalid record"):  # the torn line stays, as its own line
        assert len(read_records(path)) == 4
    assert path.read_text().startswith(text[: len(text) - 25])
    lines = path.read_text().splitlines()
    path.write_text("\n".join([lines[0], "{not json", *lines[1:]]) + "\n")
    with pytest.warns(UserWarning, match=r"run.jsonl: 2 invalid record.*line 2: not JSON"):
        assert len(read_records(path)) == 4


def test_knob_distance_counts_differing_knobs_to_the_nearest_other():
    from autotune.space import knob_distance

    d = SPACE.digits(np.array([0, 1, len(SPACE) - 1]))
    assert knob_distance(d, d[:1]).tolist() == [0, 1, len(SPACE.sizes)]  # index 1 moves the last knob
    assert knob_distance(d, d[[0, 2]]).tolist() == [0, 1, 0]
    assert knob_distance(d, d[:0]).tolist() == [len(SPACE.sizes)] * 3
