"""Hostile input (issue 39), each test written as the attack: a planted cache file, an output
path onto an input, a vars-free rule, duplicated rules, bad flags, a torn database line, a killed
parent. Each asserts one sentence naming what and where, a non-zero exit for wrong input, no
traceback, and nothing destroyed or left behind."""
from __future__ import annotations

import json
import pickle
import warnings
from pathlib import Path

import pytest

from experiments.cli import main

RULE = "ewadd-comm: (ewadd ?a ?b) <=> (ewadd ?b ?a) ; vars=a:?x?,b:?x?\n"


def run_cli(capsys: pytest.CaptureFixture, argv: list[str]) -> tuple[int, str, str]:
    try:
        code = main(argv)
    except SystemExit as exc:  # argparse's own usage errors
        code = int(exc.code or 0)
    out, err = capsys.readouterr()
    return code, out, err


def one_error(code: int, err: str, *names: str) -> str:
    """Exit 2 and one ``eqsat-lab`` error line naming every one of ``names``; no traceback."""
    assert code == 2, err
    assert "Traceback" not in err
    lines = [ln for ln in err.splitlines() if "error" in ln]
    assert len(lines) == 1, err
    for name in names:
        assert name in lines[0], lines[0]
    return lines[0]


# --------------------------------------------------------------------------- 1. cache files
class Plant:
    """Unpickling this creates ``marker``: the proof that a cache file ran code."""

    def __init__(self, marker: Path):
        self.marker = marker

    def __reduce__(self):
        return (Path.touch, (self.marker,))


def test_a_planted_pickle_in_the_cache_runs_no_code(tmp_path, monkeypatch):
    from eqsat.diskcache import DiskMemo
    from eqsat.rules import rulesets
    from eqsat.rules.rulefile import Rule

    cache, marker = tmp_path / "cache", tmp_path / "pwned"
    monkeypatch.setenv("EQSAT_LAB_CACHE", str(cache))
    rules = tmp_path / "comm.rules"
    rules.write_text(RULE)
    key = rulesets.content_key(rules.read_bytes())
    at = DiskMemo(f"parsed-rules-{key[:16]}").path
    cache.mkdir()
    payload = pickle.dumps({(key, str(rules)): Plant(marker)})
    at.write_bytes(payload)                       # the predictable name
    at.with_suffix(".pickle").write_bytes(payload)  # and the name older versions read
    rulesets._load.cache_clear()
    with pytest.warns(UserWarning, match=f"{at}: ignoring this cache file"):
        loaded = rulesets.load_rule_file(rules)
    assert not marker.exists()
    assert [r.name for r in loaded] == ["ewadd-comm"] and isinstance(loaded[0], Rule)
    rulesets._load.cache_clear()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # rebuilt: read back without a warning
        assert rulesets.load_rule_file(rules) == loaded


def test_a_cache_file_naming_a_foreign_class_is_refused(tmp_path, monkeypatch):
    from eqsat.diskcache import FORMAT, DiskMemo

    monkeypatch.setenv("EQSAT_LAB_CACHE", str(tmp_path))
    memo = DiskMemo("probe")
    entry = [1, {"@": "Popen", "=": [["touch", "x"]]}]
    tmp_path.joinpath(memo.path.name).write_text(json.dumps({"format": FORMAT, "entries": [entry]}))
    with pytest.warns(UserWarning, match="names a class it may not build: 'Popen'"):
        assert DiskMemo("probe").get(1) is None


# --------------------------------------------------------------------------- 2. output paths
def matmul_model(path: Path) -> Path:
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper, save

    w = numpy_helper.from_array(np.random.default_rng(0).standard_normal((8, 8)).astype(np.float32), "w")
    g = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["y"]), helper.make_node("Relu", ["y"], ["z"])],
                          "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 8])],
                          [helper.make_tensor_value_info("z", TensorProto.FLOAT, [2, 8])], [w])
    save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), path)
    return path


@pytest.mark.parametrize("flags, names", [
    (["--json", "{model}"], ("--json", "is the input model (")),
    (["--search", "eqsat", "--dump-egraph", "{model}"], ("--dump-egraph", "is the input model (")),
    (["--json", "{link}"], ("--json", "is the input model (")),             # a symlink to the input
    (["--json", "{out}"], ("--json", "also --out")),                # the written model
    (["--out", "{missing}/o.onnx"], ("--out", "does not exist")),
    (["--out", "{long}"], ("--out", "file name is 245 bytes")),
    (["--out", "{tmp}"], ("--out", "is a folder")),
])
def test_an_output_path_onto_an_input_or_unwritable_is_refused_before_the_search(tmp_path, capsys, flags, names):
    model = matmul_model(tmp_path / "m.onnx")
    (tmp_path / "link.onnx").symlink_to(model)
    before = model.read_bytes()
    paths = {"model": model, "link": tmp_path / "link.onnx", "out": tmp_path / "o.onnx", "tmp": tmp_path,
             "missing": tmp_path / "nowhere", "long": tmp_path / ("x" * 240 + ".onnx")}
    argv = ["optimize", str(model), "--out", str(tmp_path / "o.onnx"), *[f.format(**paths) for f in flags]]
    code, out, err = run_cli(capsys, argv)
    one_error(code, err, *names)
    assert "ops" not in out  # refused before the search ran
    assert model.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["link.onnx", "m.onnx"]


def test_rule_and_extract_outputs_onto_their_inputs_are_refused(tmp_path, capsys):
    rules = tmp_path / "r.rules"
    rules.write_text(RULE)
    code, _, err = run_cli(capsys, ["rules", "minimize", str(rules), "--out", str(rules)])
    one_error(code, err, "--out", "is the input files (", str(rules))
    egraph = tmp_path / "e.json"
    egraph.write_text("{}")
    code, _, err = run_cli(capsys, ["extract", str(egraph), "--json", str(egraph)])
    one_error(code, err, "--json", "is the input file (")
    assert rules.read_text() == RULE and egraph.read_text() == "{}"


@pytest.mark.parametrize("argv, names", [
    (["experiment", "extraction", "{egraph}", "--out", "{egraph}"], ("--out", "is the input files")),
    (["experiment", "extraction", "{egraph}", "--out", "{file}"], ("--out", "is a file, not a folder")),
    (["experiment", "caps", "--out", "{file}/sub"], ("--out", "is a file, so the folder cannot be made")),
    (["table", "--out", "{file}"], ("--out", "is a file, not a folder")),
    (["compare", "--out", "{file}"], ("--out", "is a file, not a folder")),
])
def test_an_output_folder_onto_a_file_is_refused_before_the_work(tmp_path, capsys, argv, names):
    """Experiment rows and the folder-writing commands made their --out folder after the work
    (``experiment extraction E.json --out E.json``: exit 3, FileExistsError)."""
    egraph, file = tmp_path / "e.json", tmp_path / "a-file"
    egraph.write_text('{"nodes": {"a": {"op": "x", "children": [], "eclass": "c", "cost": 1}}, "root_eclasses": ["c"]}')
    file.write_text("mine")
    code, out, err = run_cli(capsys, [a.format(egraph=egraph, file=file) for a in argv])
    one_error(code, err, *names)
    assert out == "" and file.read_text() == "mine" and sorted(p.name for p in tmp_path.iterdir()) == ["a-file", "e.json"]


# --------------------------------------------------------------------------- 3. rules without vars=
README_RULES = """matmul-assoc: (matmul ?a (matmul ?b ?c)) <=> (matmul (matmul ?a ?b) ?c)
matmul-dist: (ewadd (matmul ?x ?a) (matmul ?x ?b)) <=> (matmul ?x (ewadd ?a ?b))
relu-fuse: (relu (conv2d :stride ?s :pad ?p ?x ?w)) => (conv2d :stride ?s :pad ?p :act relu ?x ?w)
comm: (ewadd ?a ?b) <=> (ewadd ?b ?a)
"""


def test_the_readme_rules_without_vars_plus_commutativity_optimize_with_eqsat(tmp_path, capsys):
    rules = tmp_path / "readme.rules"
    rules.write_text(README_RULES)  # ranks inferred: commutativity has a rank-0 variant, vars a:,b:
    code, out, err = run_cli(capsys, ["optimize", "lora", "--param", "tokens=64", "--param", "d_model=256",
                                      "--search", "eqsat", "--rules", str(rules), "--seconds", "5"])
    assert code == 0, err
    assert "lora on h100: 16.11 -> 4.06 µs" in out  # the rank-16 factors multiplied first


def test_a_rank_0_variable_written_a_colon_parses():
    from eqsat.rules.rulefile import parse_rules

    rule, = parse_rules("comm: (ewadd ?a ?b) <=> (ewadd ?b ?a) ; vars=a:,b:?x?\n")
    assert rule.var_dims == {"a": (), "b": (None, None)}


def test_a_non_utf8_rule_file_is_named_with_its_line(tmp_path, capsys):
    rules = tmp_path / "latin1.rules"
    rules.write_bytes(b"# ok\ncomm: (ewadd ?a ?b) <=> (ewadd ?b ?a) ; caf\xe9\n")
    code, _, err = run_cli(capsys, ["rules", "check", str(rules)])
    one_error(code, err, f"{rules}:2:", "not UTF-8")


# --------------------------------------------------------------------------- 4. memory
SMALL_LORA = ["lora", "--param", "tokens=64", "--param", "d_model=256", "--search", "eqsat"]
ASSOC = "(matmul ?a (matmul ?b ?c)) <=> (matmul (matmul ?a ?b) ?c) ; vars=a:?x?,b:?x?,c:?x?\n"


def test_a_rule_repeated_300_times_is_merged_and_reported(tmp_path, capsys):
    rules = tmp_path / "dup.rules"
    rules.write_text(ASSOC * 300)  # 300 copies took 3.1 GB and 16 s to load before
    code, out, err = run_cli(capsys, ["optimize", *SMALL_LORA, "--rules", str(rules)])
    assert code == 0, err
    assert f"eqsat-lab: warning: {rules}: 299 duplicate rule(s) merged, 1 kept (line2 = line1" in err
    assert "Traceback" not in err and "16.11 -> 12.15 µs" in out


def test_the_memory_cap_stops_saturation_with_the_best_graph_so_far(capsys, tmp_path):
    rules = tmp_path / "r.rules"
    rules.write_text(README_RULES)
    code, out, err = run_cli(capsys, ["optimize", *SMALL_LORA, "--rules", str(rules), "--memory-gb", "0.001"])
    assert code == 0, err
    assert "stop: memory limit (" in out and "cap 0.001 GB)" in out
    assert "1 iterations" in out and "verified against the input" in out


def test_the_memory_cap_while_loading_rules_is_one_error_naming_the_flag(capsys):
    code, out, err = run_cli(capsys, ["optimize", *SMALL_LORA, "--memory-gb", "0.001"])
    one_error(code, err, "memory cap", "--memory-gb")
    assert out == ""


def test_the_memory_cap_is_checked_by_the_runner_between_iterations():
    from eqsat.egraph.limits import Limits
    from eqsat.egraph.runner import EGraphRunner
    from eqsat.models import build
    from eqsat.rules.rulefile import parse_rules

    runner = EGraphRunner(parse_rules(README_RULES.replace("comm: (ewadd ?a ?b) <=> (ewadd ?b ?a)\n", "")))
    runner.insert(build("lora", tokens=64, d_model=256))
    report = runner.run(Limits(iterations=10, memory_gb=1e-6))
    assert report.stop.startswith("memory limit") and len(report.iterations) == 1
    with pytest.raises(ValueError, match="memory cap must be a finite number of GB > 0"):
        Limits(memory_gb=0)


# --------------------------------------------------------------------------- 5. numeric flags
# in tests/test_fuzz.py (the hypothesis suite, run at scale by `eqsat-lab experiment fuzz`):
# test_every_numeric_flag_uses_a_shared_type, test_every_numeric_flag_refuses_the_issues_attacks,
# test_numeric_flags_fail_at_parse_time_naming_the_flag


# --------------------------------------------------------------------------- 9. a killed parent
def _gone(pid: int) -> bool:
    import os

    try:
        state = Path(f"/proc/{pid}/status").read_text()
    except FileNotFoundError:
        return True
    return "\nState:\tZ" in state or not os.path.exists(f"/proc/{pid}")


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="reads /proc")
def test_killing_the_parent_by_its_pid_ends_its_saturation_worker():
    import os
    import signal
    import subprocess
    import sys
    import time

    parent = subprocess.Popen([sys.executable, "-c", (
        "import time\n"
        "from eqsat.egraph.optimize import SaturationWorker\n"
        "w = SaturationWorker.shared()\n"
        "print(w.proc.pid, flush=True)\n"
        "time.sleep(60)\n")], stdout=subprocess.PIPE, text=True)
    worker = int(parent.stdout.readline())
    assert not _gone(worker)
    os.kill(parent.pid, signal.SIGKILL)  # its pid, not its group
    parent.wait()
    deadline = time.monotonic() + 5
    while not _gone(worker) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _gone(worker)


def test_ctrl_c_stops_a_run_with_one_line_and_no_worker_traceback(tmp_path):
    import os
    import signal
    import subprocess
    import sys
    import time

    run = subprocess.Popen([sys.executable, "-m", "experiments.cli", "optimize", "nasrnn", "--search", "eqsat"],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
                           env=os.environ | {"PYTHONPATH": str(Path(__file__).parents[1])},
                           # a pytest-xdist worker ignores SIGINT, and an ignored signal stays ignored across exec
                           preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    children = Path(f"/proc/{run.pid}/task/{run.pid}/children")
    deadline = time.monotonic() + 20
    while run.poll() is None and not children.read_text().split() and time.monotonic() < deadline:
        time.sleep(0.02)  # the saturation worker starts first thing in the run, seconds before its end
    time.sleep(0.2)  # into the run: nasrnn takes 2-3 s here, the worker starts within 0.3 s
    assert run.poll() is None, "the run ended before Ctrl-C"
    os.killpg(run.pid, signal.SIGINT)  # a terminal's Ctrl-C reaches the whole group
    _, err = run.communicate(timeout=30)
    assert run.returncode == 130, err
    assert "Traceback" not in err and err.strip().splitlines()[-1] == "eqsat-lab: interrupted"


def test_ctrl_c_during_an_ilp_solve_raises_and_stops_the_solve():
    """HiGHS calls back into Python; a Ctrl-C raised there was swallowed and the run exited 0."""
    import os
    import signal
    import threading
    import time

    import numpy as np
    from scipy.sparse import csr_matrix

    from eqsat.egraph.solvers import Program, solve_highs

    rng = np.random.default_rng(0)
    n, m = 300, 150
    dense = np.where(rng.random((m, n)) < 0.1, rng.random((m, n)) * 3, 0.0)
    program = Program(-rng.random(n), csr_matrix(dense), np.full(m, -np.inf), np.full(m, 10.0), np.zeros(n, bool))
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)  # a pytest-xdist worker ignores SIGINT
    try:
        threading.Timer(0.5, lambda: os.kill(os.getpid(), signal.SIGINT)).start()
        began = time.perf_counter()
        with pytest.raises(KeyboardInterrupt):
            solve_highs(program, 20.0, None)
        assert time.perf_counter() - began < 10  # cancelled, not run to its 20 s limit
    finally:
        signal.signal(signal.SIGINT, previous)


# --------------------------------------------------------------------------- 7. measurement database
def _db(path: Path):
    from eqsat.cost.measured.database import Context, MeasurementDB

    return MeasurementDB(Context("m", "onnxruntime test", 1), path)


def _make_timing(us: float):
    from eqsat.cost.measured.timer import Timing

    return Timing(us, us, us, 5)


def test_a_torn_last_line_is_skipped_and_does_not_swallow_the_next_record(tmp_path):
    path = tmp_path / "db.jsonl"
    db = _db(path)
    db.put("a", _make_timing(1.0))
    with path.open("a") as fh:
        fh.write('{"machine": "m", "runtime": "onnxruntime test", "threads": 1, "key": "b", "tim')  # killed here
    _db(path).put("c", _make_timing(3.0))
    with pytest.warns(UserWarning, match=rf"{path}: 1 corrupt line\(s\) skipped \(corrupt: line 2\)"):
        again = _db(path)
    assert set(again.timings) == {"a", "c"}


def test_a_read_only_database_falls_back_to_memory_with_a_warning(tmp_path):
    import os

    path = tmp_path / "db.jsonl"
    _db(path).put("a", _make_timing(1.0))
    before = path.read_bytes()
    os.chmod(path, 0o444)
    os.chmod(tmp_path, 0o555)
    try:
        db = _db(path)
        if os.access(path, os.W_OK):
            pytest.skip("running as a user who can write read-only files")
        with pytest.warns(UserWarning, match=f"{path}: the measurement database cannot be written"):
            db.put("b", _make_timing(2.0))
        assert db.get("b") is not None and db.get("a") is not None
        db.put("c", _make_timing(3.0))  # one warning, then quietly in memory
    finally:
        os.chmod(tmp_path, 0o755)
        os.chmod(path, 0o644)
    assert path.read_bytes() == before and sorted(p.name for p in tmp_path.iterdir()) == ["db.jsonl"]


def test_a_database_that_cannot_be_written_falls_back_to_memory(tmp_path):
    (tmp_path / "a-file").write_text("")
    path = tmp_path / "a-file" / "db.jsonl"  # its folder is a file: unwritable for root too
    db = _db(path)
    with pytest.warns(UserWarning, match=f"{path}: the measurement database cannot be written"):
        db.put("b", _make_timing(2.0))
    assert db.get("b") is not None and db.path is None
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a-file"]


def test_two_processes_time_a_kernel_once_between_them(tmp_path):
    import subprocess
    import sys

    probe = ("import sys, time\n"
             "from eqsat.cost.measured.database import Context, MeasurementDB\n"
             "from tests.test_hostile import _make_timing\n"
             "db = MeasurementDB(Context('m', 'onnxruntime test', 1), sys.argv[1])\n"
             "def slow():\n"
             "    time.sleep(0.5); print('timed', flush=True); return _make_timing(1.0)\n"
             "db.measure('k', slow)\n")
    env = {"PYTHONPATH": str(Path(__file__).parents[1])}
    runs = [subprocess.Popen([sys.executable, "-c", probe, str(tmp_path / "db.jsonl")], stdout=subprocess.PIPE,
                             text=True, env=env) for _ in range(2)]
    outs = [r.communicate(timeout=60)[0] for r in runs]
    assert sum(o.count("timed") for o in outs) == 1
    lines = (tmp_path / "db.jsonl").read_text().splitlines()
    assert len(lines) == 1 and '"load1"' in lines[0] and '"cores"' in lines[0]


# --------------------------------------------------------------------------- 6. caps
def test_the_alpha_search_time_limit_holds_inside_one_expansion():
    from eqsat.models import build
    from eqsat.rules.rulesets import default_rules
    from taso_baseline.search import AlphaLimits, alpha_search

    rules = default_rules(["matrix-min", "epilogue"])
    result = alpha_search(build("nasrnn"), rules, "h100", AlphaLimits(time_limit=0.2, budget=10**6))
    assert result.stop == "time limit"
    assert result.search_s < 0.2 + 2.5  # loose: a loaded CI (it ran 19 s before); docs/results/hostile has the tight numbers


def test_no_full_collection_pauses_the_alpha_search():
    """Full collections scanned every graph the search keeps, freed nothing and paused it up to
    0.54 s (NasRNN), long enough to carry it past a time limit by more than 10% if one lands on
    the deadline. Inside the search only the young generations are collected; the thresholds
    come back after it."""
    import gc

    from eqsat.models import build
    from eqsat.rules.rulesets import default_rules
    from taso_baseline.search import AlphaLimits, Expander, alpha_search, young_collections_only

    full: list[int] = []

    def note(phase: str, info: dict) -> None:
        if phase == "start" and info["generation"] == 2:
            full.append(1)

    before = gc.get_threshold()
    gc.callbacks.append(note)
    try:
        with young_collections_only():
            kept = [[i] for i in range(600_000)]  # enough new containers for several full collections
        assert not full and gc.get_threshold() == before
        kept += [[i] for i in range(600_000)]
        assert full  # the same allocation outside does collect in full: the probe can see one
    finally:
        gc.callbacks.remove(note)
    del kept
    rules = default_rules(["matrix-min"])
    inside: list[tuple[int, int, int]] = []

    class Noting(Expander):
        def __call__(self, ex):
            inside.append(gc.get_threshold())
            return super().__call__(ex)

    alpha_search(build("lora"), rules, "h100", AlphaLimits(budget=3), expander=Noting(rules))
    assert inside and all(t[2] > 10**6 for t in inside) and gc.get_threshold() == before


@pytest.mark.slow
@pytest.mark.parametrize("flags, check", [
    (["--search", "taso", "--time-limit", "1"], lambda out: float(out.split(" in ")[1].split(" s")[0]) < 1.1),
    (["--search", "eqsat", "--nodes", "500"], lambda out: int(out.split(" e-nodes")[0].split(", ")[-1]) <= 550),
    (["--search", "eqsat", "--seconds", "2"], lambda out: float(out.split("saturate ")[1].split(" s")[0]) < 3.0),
])
def test_caps_hold_on_nasrnn_on_a_loaded_machine(capsys, flags, check):
    """The issue's three commands. The α time limit and the node cap hold within 10%; the e-graph's
    time cap within half here (its worker is killed 2% past the cap, then stopped and its snapshot
    read: +7.8% median under load, docs/results/hostile has the runs)."""
    code, out, err = run_cli(capsys, ["optimize", "nasrnn", *flags])
    assert code == 0, err
    assert check(out), out


# --------------------------------------------------------------------------- 8. smaller ones
def test_a_model_too_large_for_memory_is_refused_before_the_search(capsys, monkeypatch):
    from eqsat import pipeline

    code, out, err = run_cli(capsys, ["optimize", "lora", "--param", "tokens=100000000"])
    one_error(code, err, "model lora tokens=100000000", "GiB in float64", f"cap of {pipeline.CHECK_MAX_GIB} GiB")
    assert out == ""
    monkeypatch.setattr(pipeline, "memory_bytes", lambda: 1 << 30)  # under the cap, more than this machine has
    code, out, err = run_cli(capsys, ["optimize", "lora", "--param", "tokens=50000"])
    one_error(code, err, "model lora tokens=50000", "GiB in float64", "free here")
    assert out == ""


@pytest.mark.parametrize("damage", [b"[]", b'{"fn": "builtins:dict"}', b"\xff\xfe", b"{" * 100_000, b"{\"re"])
def test_a_damaged_resume_cell_is_recomputed_with_a_warning(tmp_path, damage):
    from experiments.sweep import Cell, RunOptions, run_cells

    cells = [Cell.of("toy", "builtins:dict", index=i, seed=7) for i in range(2)]
    first = run_cells(cells, tmp_path, options=RunOptions(progress=False))
    cells[0].path(tmp_path).write_bytes(damage)
    with pytest.warns(UserWarning, match=f"{cells[0].path(tmp_path)}: damaged cell file"):
        assert run_cells(cells, tmp_path, options=RunOptions(progress=False)) == first
    assert run_cells(cells, tmp_path, options=RunOptions(progress=False)) == first  # rewritten whole


class _Half:
    """A figure whose save dies halfway (a killed run, a full disk)."""

    def savefig(self, path, **kwargs):
        Path(path).write_bytes(b"\x89PNG half")
        raise OSError("disk full")


def test_figures_and_the_cost_table_are_written_whole_or_not_at_all(tmp_path):
    from experiments import cost_table
    from experiments.output import save_figure

    old = tmp_path / "plot.png"
    old.write_bytes(b"the previous figure")
    with pytest.raises(OSError, match="disk full"):
        save_figure(_Half(), old, dpi=120)
    assert old.read_bytes() == b"the previous figure" and sorted(p.name for p in tmp_path.iterdir()) == ["plot.png"]
    rows = cost_table.cost_rows(["qkv"], ("h100",), progress=False)
    cost_table.write_outputs(rows, tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cost_table.csv", "cost_table.json", "plot.png"]


def test_a_zoo_model_killed_while_written_leaves_the_previous_file(tmp_path, monkeypatch):
    """The generated ONNX models (``experiment zoo``, ``experiment onnx --models pt_*``) were saved
    in place: a run killed mid-save left half a model for the resumed run to read."""
    import onnx

    from experiments.zoo import ZOO

    model = ZOO["lora_mlp"].write(tmp_path / "m.onnx", small=True)
    before = model.read_bytes()

    def half(proto, path, *args, **kwargs):
        Path(path).write_bytes(proto.SerializeToString()[:100])
        raise KeyboardInterrupt

    monkeypatch.setattr(onnx, "save", half)
    with pytest.raises(KeyboardInterrupt):
        ZOO["lora_mlp"].write(model, seed=1, small=True)
    assert model.read_bytes() == before and [p.name for p in tmp_path.iterdir()] == ["m.onnx"]
