"""Each package's docstring names every module and subpackage in it, so a newcomer reading the
room's door sees all that it holds (a moved or new module cannot be left out)."""
from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("eqsat", "rulegen", "taso_baseline", "pet", "autotune", "experiments")
INITS = [p for pkg in PACKAGES for p in sorted((ROOT / pkg).rglob("__init__.py"))]


def dotted(folder: Path) -> str:
    """The import name of the package in ``folder`` (its folders up to the first without an
    ``__init__.py``)."""
    parts = []
    while (folder / "__init__.py").exists():
        parts.insert(0, folder.name)
        folder = folder.parent
    return ".".join(parts)


def unnamed(init: Path) -> list[str]:
    """The modules and subpackages of ``init``'s package its docstring does not name, as ``name``
    (or `name`, `name/`, name.py, or a reference :mod:`.name` / :mod:`package.name`)."""
    doc = ast.get_docstring(ast.parse(init.read_text())) or ""
    folder = init.parent
    members = [f.stem for f in folder.glob("*.py") if f.name != "__init__.py"]
    members += [d.name for d in folder.iterdir() if (d / "__init__.py").exists()]
    here = re.escape(dotted(folder))
    return sorted(m for m in members
                  if not re.search(rf"`(?:~?(?:{here})?\.)?{m}(\.py|/)?`|\b{m}\.py\b", doc))


@pytest.mark.parametrize("init", INITS, ids=lambda p: p.parent.relative_to(ROOT).as_posix())
def test_every_package_docstring_names_every_module_in_it(init: Path):
    missing = unnamed(init)
    assert not missing, f"{init.relative_to(ROOT)}'s docstring does not name: {', '.join(missing)}"


def test_the_check_sees_a_module_left_out(tmp_path):
    (tmp_path / "__init__.py").write_text('"""Holds ``alpha`` and `beta.py`."""\n')
    for name in ("alpha", "beta", "gamma"):
        (tmp_path / f"{name}.py").write_text("")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "__init__.py").write_text("")
    assert unnamed(tmp_path / "__init__.py") == ["gamma", "sub"]


def test_a_reference_to_the_module_names_it(tmp_path):
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text('"""Holds :mod:`.alpha`, :mod:`pkg.beta` and :mod:`other.gamma`."""\n')
    for name in ("alpha", "beta", "gamma", "gamma_extra"):
        (pkg / f"{name}.py").write_text("")
    assert unnamed(pkg / "__init__.py") == ["gamma", "gamma_extra"]
