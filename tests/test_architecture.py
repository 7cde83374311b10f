"""The house rules a newcomer relies on: no import circles between the project's modules (every
import counts, also those inside functions), imports that point down the layers only (``eqsat`` at
the bottom, ``experiments`` at the top), and no module over 500 lines."""
from __future__ import annotations

import ast
from pathlib import Path

import networkx as nx
import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("eqsat", "rulegen", "taso_baseline", "pet", "autotune", "experiments")
BUILT_ON_EQSAT = ("rulegen", "taso_baseline", "pet", "autotune", "experiments")


def _modules() -> dict[str, Path]:
    mods = {}
    for pkg in PACKAGES:
        for f in (ROOT / pkg).rglob("*.py"):
            name = ".".join(f.relative_to(ROOT).with_suffix("").parts)
            mods[name.removesuffix(".__init__")] = f
    return mods


def import_graph() -> nx.DiGraph:
    """Module -> module it imports (``from . import x`` of a submodule points at the submodule)."""
    mods = _modules()
    g = nx.DiGraph()
    g.add_nodes_from(mods)
    for name, f in mods.items():
        package = name if f.name == "__init__.py" else name.rpartition(".")[0]
        for node in ast.walk(ast.parse(f.read_text())):
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = package.split(".")[:len(package.split(".")) - (node.level - 1)] if node.level else []
                module = ".".join(base + ([node.module] if node.module else []))
                subs = [f"{module}.{a.name}" for a in node.names if f"{module}.{a.name}" in mods]
                targets = subs if subs and len(subs) == len(node.names) else [module] + subs
            else:
                continue
            g.add_edges_from((name, t) for t in targets if t in mods and t != name)
    return g


def test_no_import_cycles():
    cycles = list(nx.simple_cycles(import_graph()))
    assert not cycles, f"import circles: {cycles[:5]}"


def test_the_checker_sees_a_cycle(tmp_path, monkeypatch):
    """The cycle check is not vacuous: it finds the circle the op table had (ops -> onnx -> ops)."""
    g = import_graph()
    g.add_edge("eqsat.ir.ops", "eqsat.onnx.runtime")
    assert any("eqsat.ir.ops" in c for c in nx.simple_cycles(g))


def test_no_module_over_500_lines():
    long = {name: n for name, f in _modules().items() if (n := len(f.read_text().splitlines())) > 500}
    assert not long, long


def test_nothing_outside_experiments_imports_experiments():
    """The import direction: the library (``eqsat``, the searches, the tuners) is used by the
    experiments and the CLI, never the other way round."""
    g = import_graph()
    upward = [(a, b) for a, b in g.edges if not a.startswith("experiments") and b.startswith("experiments")]
    assert not upward, upward


def test_the_direction_checker_sees_an_upward_import():
    g = import_graph()
    g.add_edge("eqsat.pipeline", "experiments.command")
    assert [(a, b) for a, b in g.edges if not a.startswith("experiments") and b.startswith("experiments")]


def _top(module: str) -> str:
    return module.partition(".")[0]


def eqsat_upward_imports(g: nx.DiGraph) -> list[tuple[str, str]]:
    """Imports from a module of ``eqsat`` into a package built on it (none is allowed)."""
    return [(a, b) for a, b in g.edges if _top(a) == "eqsat" and _top(b) in BUILT_ON_EQSAT]


def test_eqsat_imports_nothing_built_on_it():
    """``eqsat`` is the bottom layer: the IR, rules, costs, rewriting machinery and the e-graph
    search import none of the packages above them (the α search, PET, the tuners, the rule
    toolchain, the experiments); those are reached through registries of ``"module:name"`` rows
    (the searches; the ``hypogpu`` device's cost model, which lives with its tuners)."""
    upward = eqsat_upward_imports(import_graph())
    assert not upward, upward


@pytest.mark.parametrize("target", ["rulegen.verify", "taso_baseline.search", "pet.rewrite", "autotune.registry",
                                    "experiments.command"])
def test_the_layer_checker_sees_an_upward_import(target):
    g = import_graph()
    assert target in g
    g.add_edge("eqsat.onnx.runtime_baseline", target)
    assert ("eqsat.onnx.runtime_baseline", target) in eqsat_upward_imports(g)
