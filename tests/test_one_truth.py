"""One truth per concept: search, rule-set and device names are written only in their registries;
callers ask a cost model only through the CostModel interface; rules load through one path."""
from __future__ import annotations

import ast
from functools import cache
from pathlib import Path

from eqsat.cost.devices import DEVICES, MEASURED_DEVICES, TUNED_DEVICES
from eqsat.rules.rulesets import RULE_SETS
from experiments.searches import SEARCHES, get_search

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("eqsat", "experiments", "rulegen", "taso_baseline", "pet", "autotune")
REGISTRIES = {  # file -> the names it defines
    "eqsat/searches.py": set(SEARCHES),
    "eqsat/rules/rulesets.py": set(RULE_SETS),
    "eqsat/cost/devices.py": set(DEVICES) | set(MEASURED_DEVICES) | set(TUNED_DEVICES),
}
ALLOWED = {  # (file, literal): why the same string there is not a second registry
    ("taso_baseline/search.py", "taso"): "the α search class's own name (checked equal to its registry key below)",
    ("eqsat/egraph/optimize.py", "eqsat"): "the e-graph search class's own name (checked below)",
    ("pet/search.py", "pet"): "the PET search class's own name (checked below)",
    ("pet/rewrite.py", "pet"): "the PET graph rewrite's own name, its key in eqsat.searches.GRAPH_REWRITES",
    ("experiments/commands/pet.py", "pet"): "the pet command's name, which the PET search shares",
    ("experiments/cli.py", "pet"): "the pet command's module in the command table",
    ("autotune/measure.py", "hypogpu"): "the simulated measurer's name: the GPU the tuned device prices on",
    ("experiments/commands/tune.py", "hypogpu"): "tune's measurer choice, the simulated measurer's name",
    ("experiments/runs/tune.py", "hypogpu"): "tune judges a result by the hidden model only on the simulated measurer",
    ("autotune/registry.py", "hypogpu"): "the measurer table, keyed by the measurers' names",
    ("rulegen/world.py", "matrix"): "a world's name; the generated rule set is named after it",
    ("rulegen/world.py", "conv"): "a world's name; the generated rule set is named after it",
    ("experiments/runs/benchmarks.py", "matrix"): "the default world of the generator benchmarks",
    ("eqsat/models/builder.py", "conv"): "the name prefix of conv nodes in the benchmark builders",
    ("eqsat/cost/measured/kernels.py", "conv"): "a fused kernel's form (conv or bias), not a rule set",
    ("pet/programs.py", "conv"): "a PET program graph's name",
    ("autotune/autotvm.py", "epilogue"): "a tuning workload's field, not a rule set",
    ("autotune/measure.py", "epilogue"): "a tuning workload's field, not a rule set",
    ("eqsat/onnx/writer.py", "eqsat"): "the default graph name of a written ONNX file (the package's name)",
    ("eqsat/pytorch/backend.py", "eqsat"): "the torch.compile backend's name (the package's name, as its entry point)",
}


@cache
def sources() -> list[tuple[str, ast.Module]]:
    """Every module of the packages, parsed once for all the checks."""
    return [(str(p.relative_to(ROOT)), ast.parse(p.read_text(), str(p)))
            for pkg in PACKAGES for p in sorted((ROOT / pkg).rglob("*.py"))]


def test_registry_names_are_written_only_in_their_registries():
    names = {n for defined in REGISTRIES.values() for n in defined}
    found = []
    for path, tree in sources():
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and node.value in names:
                if node.value in REGISTRIES.get(path, ()) or (path, node.value) in ALLOWED:
                    continue
                found.append(f"{path}:{node.lineno}: {node.value!r}")
    assert not found, "registry names written outside their registry:\n" + "\n".join(found)


def test_the_allow_list_has_no_stale_entries():
    literals = {(path, node.value) for path, tree in sources() for node in ast.walk(tree)
                if isinstance(node, ast.Constant) and isinstance(node.value, str)}
    assert not [key for key in ALLOWED if key not in literals]


def test_each_search_class_carries_its_registry_name():
    for name in SEARCHES:
        assert get_search(name).name == name


def test_cost_models_are_asked_only_through_the_interface():
    """No getattr/hasattr on a cost model: what a caller needs is a CostModel member."""
    found = []
    for path, tree in sources():
        for node in ast.walk(tree):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("getattr", "hasattr")
                    and node.args and isinstance(node.args[0], ast.Name)
                    and node.args[0].id in ("model", "cost_model", "cost")):
                found.append(f"{path}:{node.lineno}")
    assert not found, found


def test_cost_models_are_built_only_by_the_device_registry():
    """Outside ``eqsat/cost/`` no module constructs a cost model class: a device name becomes a
    model only through :func:`eqsat.cost.registry.cost_model`, so every kind is parsed one way."""
    rows = [*DEVICES.values(), *MEASURED_DEVICES.values(), *TUNED_DEVICES.values()]
    classes = {row.cost_model.partition(":")[2] for row in rows}
    assert {"RooflineCost", "OrtCpuCost", "TorchCpuCost", "TorchCudaCost", "TunedHypoGPUCost"} <= classes
    found = [f"{path}:{node.lineno}: {node.func.id}" for path, tree in sources() if not path.startswith("eqsat/cost/")
             for node in ast.walk(tree)
             if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in classes]
    assert not found, found


def test_rules_load_through_rulesets_only():
    """``rulefile.load_rules`` parses a file; every caller goes through ``rulesets.default_rules``."""
    callers = []
    for path, tree in sources():
        if path.startswith("eqsat/rules/") or path == "eqsat/__init__.py":  # the loader, and the public re-export
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Name) and node.id == "load_rules" or \
                    isinstance(node, ast.alias) and node.name == "load_rules":
                callers.append(f"{path}:{getattr(node, 'lineno', '?')}")
    assert not callers, callers
