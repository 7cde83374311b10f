"""The builder/runner plumbing of real-kernel targets, with a fake compiler (no TVM needed)."""
from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from autotune.compiled import CompiledMeasurer
from autotune.measure import best_from_records
from autotune.space import Config
from autotune.workload import Workload


class FakeCompiler:
    """A target whose artifacts are JSON files: block_m 16 fails to build, block_m 32 builds forever,
    block_n 16 computes a wrong result, num_warps 32 hangs at run time; otherwise the time is a
    function of the config (smaller block_k is faster)."""

    name = "fake-cc"

    def machine(self) -> str:
        return "test-machine"

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
    from autotune.tvm_target import TvmLlvmTarget

    m = CompiledMeasurer(TvmLlvmTarget(threads=1), tmp_path / "r.jsonl", build_workers=1, repeats=3)
    try:
        results = m.measure(Workload(64, 64, 64), [cfg(), cfg(split_k=2, group_m=2, num_warps=8)])
    finally:
        m.close()
    assert all(r.ok and 0 < r.time_us < 1e5 for r in results), [r.error for r in results]
    assert json.loads((tmp_path / "r.jsonl").read_text().splitlines()[0])["target"] == "tvm-llvm"
