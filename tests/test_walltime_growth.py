"""The walltime experiment's cells (models with sizes, zoo or benchmark) and its growth fit."""
from __future__ import annotations

import pytest

from experiments.bench.growth import fit, fits
from experiments.bench.walltime import parse_cells


def test_a_model_with_sizes_is_one_cell_per_size():
    cells = parse_cells("bert:layers=4/8:hidden=128,gpt2:layers=2,squeezenet")
    assert [c.label for c in cells] == ["bert:layers=4:hidden=128", "bert:layers=8:hidden=128", "gpt2:layers=2",
                                        "squeezenet"]
    assert [c.layers() for c in cells] == [4, 8, 2, None]
    assert [c.zoo for c in cells] == [False, False, True, False]


@pytest.mark.parametrize("text", ["nosuch", "bert:layers", "bert:=4", ""])
def test_a_bad_model_list_is_one_clear_error(text):
    with pytest.raises(ValueError, match="--models"):
        parse_cells(text)


def test_the_fit_tells_linear_from_quadratic_growth():
    layers = [4, 8, 16, 32]
    line = fit(layers, [1 + 0.5 * n for n in layers])
    assert line is not None and line.slope == pytest.approx(0.5) and line.r2 == pytest.approx(1.0)
    assert line.curvature == pytest.approx(1.0) and "linear" in line.describe("s")
    square = fit(layers, [n * n for n in layers])
    assert square is not None and square.curvature == pytest.approx(48 / 12) and "super-linear" in square.describe("s")
    assert fit([4, 8], [1.0, 2.0]) is None  # two depths fit any line
    flat = fit(layers, [5.0, 4.0, 6.0, 10.0])
    assert flat is not None and "no growth between the two shallowest" in flat.describe("s")


def test_fits_are_per_model_and_search_and_skip_failed_cells():
    rows = [{"model": "bert", "search": "eqsat", "layers": n, "wall_s": n, "cpu_s": n, "peak_mb": 100 + n,
             "stop": "time limit" if n == 16 else "saturated", "time_bounded": n == 16} for n in (4, 8, 16)] + [{"model": "bert", "search": "taso", "layers": 4, "error": "exit 2"}]
    lines = fits(rows)
    assert len(lines) == 3 and all(line.startswith("bert, eqsat") for line in lines)
    assert all("time limit at 1 of 3 depths" in line for line in lines)


def test_a_cell_reports_each_phase_median_and_its_ratio_to_tensat():
    from experiments.bench.walltime import SizedModel, bottom_lines, summarize

    def run(search_s, saturate, load=1.0):
        return {"wall_s": search_s + 1, "cpu_s": 1.0, "peak_mb": 100.0, "load": load, "search_s": search_s,
                "stop": "saturated", "speedup_pct": 5.0, "best_us": 94.8,
                "phases": {"startup": 0.3, "compile": 0.1, "saturate": saturate}}

    vgg = SizedModel("vgg19", "vgg19", ())
    row = summarize(vgg, "eqsat", [run(0.2, 0.05), run(0.4, 0.3), run(0.3, 0.1, load=2.0)])
    assert row["search_s"] == 0.3 and row["saturate_s"] == 0.1 and row["startup_s"] == 0.3
    assert row["tensat_s"] == 0.4 and row["vs_tensat"] == 0.75 and (row["load_min"], row["load_max"]) == (1.0, 2.0)
    alpha = summarize(vgg, "taso", [run(3.0, 0.0)])
    assert alpha["vs_tensat"] is None  # TENSAT published its own search's seconds only
    sized = summarize(SizedModel("vgg19:image=112", "vgg19", (("image", 112),)), "eqsat", [run(0.2, 0.1)])
    assert sized["vs_tensat"] is None  # another size than the one TENSAT ran
    lines = bottom_lines([row, alpha, summarize(SizedModel("bert", "bert", ()), "eqsat", [run(1.05, 0.1)])])
    assert "over 2 of TENSAT's seven models: 0.75x" in lines[0]  # both 0.75x
    assert lines[1].startswith("α/e-graph search_s ratio: vgg19 10x")


def test_a_note_says_when_the_timed_processes_compile_from_source(tmp_path, monkeypatch):
    import compileall
    import importlib

    from experiments.bench.walltime import bytecode_lines

    package = tmp_path / "timedpkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "mod.py").write_text("x = 1\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    importlib.invalidate_caches()
    monkeypatch.setenv("PYTHONDONTWRITEBYTECODE", "1")
    (note,) = bytecode_lines(("timedpkg",))
    assert note.startswith("note: 2 of 2 modules have no current bytecode")
    assert compileall.compile_dir(str(package), quiet=1)
    assert bytecode_lines(("timedpkg",)) == []
    monkeypatch.delenv("PYTHONDONTWRITEBYTECODE")
    monkeypatch.setattr("sys.flags", type("F", (), {"dont_write_bytecode": False})())
    (package / "mod.py").write_text("x = 2  # newer than its bytecode\n")
    assert bytecode_lines(("timedpkg",)) == []  # Python writes it itself


def test_a_preset_reaches_every_timed_command_and_one_a_search_lacks_fails_first(tmp_path):
    import argparse

    from experiments.bench.walltime import SizedModel, _command, main

    cmd = _command(SizedModel("vgg19", "vgg19", ()), "eqsat", "h100", tmp_path, "tensat-paper")
    assert cmd[-2:] == ["--preset", "tensat-paper"] and "--preset" not in _command(
        SizedModel("vgg19", "vgg19", ()), "eqsat", "h100", tmp_path)
    args = argparse.Namespace(models="vgg19", searches="eqsat,taso", device="h100", runs=1, out=str(tmp_path / "out"),
                              timeout=10.0, preset="tensat-paper")
    with pytest.raises(ValueError, match="'taso' has no preset 'tensat-paper'"):
        main(args)
    assert not (tmp_path / "out").exists()  # nothing ran, nothing written


def test_the_machine_reference_line_gives_the_median_and_the_spread():
    from experiments.bench.walltime import reference_line

    line = reference_line([0.70, 0.58, 0.64])
    assert "median 0.640 s, 0.580-0.700 s over 3 takes" in line
