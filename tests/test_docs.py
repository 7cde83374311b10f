"""The docs cannot rot: the README's architecture names every package and only paths that exist,
every package says what its room holds, every link and every project path in the docs resolves,
and the docs carry no temporary paths."""
from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("eqsat", "rulegen", "taso_baseline", "pet", "autotune", "experiments")
DOCS = [ROOT / "README.md", ROOT / "CONTRIBUTING.md", *sorted((ROOT / "docs").rglob("*.md"))]
PROJECT_PATH = re.compile(r"(?<![\w./-])((?:eqsat|rulegen|taso_baseline|pet|autotune|experiments|tests|docs)/[\w./*-]*)")
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def packages() -> list[str]:
    """Every package directory of the project, as ``a/b/``."""
    return sorted(f"{p.parent.relative_to(ROOT).as_posix()}/" for pkg in PACKAGES for p in (ROOT / pkg).rglob("__init__.py"))


def architecture(text: str) -> str:
    """The README's architecture section: the drawing and the package table."""
    start = text.index("## Architecture")
    return text[start:text.index("\n## ", start + 1)]


def table_rows(section: str) -> dict[str, str]:
    """Package table rows: the package path -> the rest of the row."""
    rows = {}
    for line in section.splitlines():
        m = re.match(r"\| `([\w/]+/)` \|(.*)\|$", line)
        if m:
            rows[m.group(1)] = m.group(2)
    return rows


def exists(path: str, base: Path = ROOT) -> bool:
    """A path (a glob when it has ``*``) names at least one file or folder under ``base``."""
    return any(base.glob(path)) if "*" in path else (base / path).exists()


def placeholder(path: str) -> bool:
    """``eqsat/rules/NAME.rules``, ``docs/results/pet_measured/NET.json``: a name the reader fills in."""
    return any(part.split(".")[0].isupper() for part in path.split("/"))


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces as hyphens."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower().replace("`", ""))
    return text.replace(" ", "-")


def anchors(md: Path) -> set[str]:
    return {slug(line.lstrip("#")) for line in md.read_text().splitlines() if line.startswith("#")}


def test_every_package_is_in_the_readme_table_and_every_row_is_a_package():
    rows = table_rows(architecture((ROOT / "README.md").read_text()))
    assert set(rows) == set(packages()), (
        f"missing from the README's package table: {sorted(set(packages()) - set(rows))}; "
        f"rows that are no package: {sorted(set(rows) - set(packages()))}")


def test_every_file_a_table_row_names_is_in_that_package():
    for package, row in table_rows(architecture((ROOT / "README.md").read_text())).items():
        names = re.findall(r"`([\w*]+\.(?:py|rules))`", row)
        missing = [n for n in names if not exists(n, ROOT / package)]
        assert not missing, f"README's row for {package} names files it does not hold: {missing}"


def test_every_path_in_the_drawing_exists():
    section = architecture((ROOT / "README.md").read_text())
    drawing = section[section.index("```"):section.index("```", section.index("```") + 3)]
    paths = PROJECT_PATH.findall(drawing)
    assert len(paths) >= 10, "the drawing names the rooms by path"
    assert not [p for p in paths if not exists(p)], [p for p in paths if not exists(p)]
    files = {f.name for pkg in PACKAGES for f in (ROOT / pkg).rglob("*") if f.is_file()}
    bare = [n for n in re.findall(r"(?<![\w/])([\w*]+\.(?:py|rules))", drawing) if "*" not in n]
    assert not [n for n in bare if n not in files], [n for n in bare if n not in files]


@pytest.mark.parametrize("init", [p for pkg in PACKAGES for p in sorted((ROOT / pkg).rglob("__init__.py"))],
                         ids=lambda p: p.parent.relative_to(ROOT).as_posix())
def test_every_package_says_what_its_room_holds(init: Path):
    doc = ast.get_docstring(ast.parse(init.read_text()))
    assert doc and len(doc) >= 100, f"{init.relative_to(ROOT)}: a package docstring of a paragraph, please"


@pytest.mark.parametrize("md", DOCS, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_every_link_and_project_path_in_the_docs_exists(md: Path):
    text = md.read_text()
    broken = []
    for target in LINK.findall(text):
        if target.startswith(("http://", "https://", "mailto:")):
            continue
        path, _, anchor = target.partition("#")
        dest = (md.parent / path).resolve() if path else md
        if not dest.exists() or (anchor and dest.suffix == ".md" and anchor not in anchors(dest)):
            broken.append(target)
    for path in PROJECT_PATH.findall(text):
        path = path.rstrip(".")
        if not placeholder(path) and not exists(path):
            broken.append(path)
    for module in re.findall(r"python -m ((?:experiments|eqsat|autotune|pet|rulegen|taso_baseline)[\w.]*)", text):
        if not (ROOT / (module.replace(".", "/") + ".py")).exists():
            broken.append(module)
    assert not broken, f"{md.relative_to(ROOT)} names what does not exist: {broken}"


@pytest.mark.parametrize("md", DOCS, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_the_docs_carry_no_temporary_paths_or_session_history(md: Path):
    text = md.read_text()
    found = re.findall(r"/tmp/\S*|\bsessions? \d+", text, flags=re.IGNORECASE)
    assert not found, f"{md.relative_to(ROOT)}: {found}"


def test_the_checks_see_a_missing_path_and_a_missing_package(tmp_path):
    """Not vacuous: a moved file, an unnamed package and a dead anchor are all seen."""
    assert not exists("eqsat/cost.py") and exists("eqsat/cost/costmodel.py") and exists("eqsat/rules/*.rules")
    section = architecture((ROOT / "README.md").read_text())
    assert set(table_rows(section.replace("| `pet/` |", "| pet |"))) != set(packages())
    assert PROJECT_PATH.findall("see `eqsat/roofline.py` and eqsat/ir/") == ["eqsat/roofline.py", "eqsat/ir/"]
    assert slug("The main job: `compare`") == "the-main-job-compare" and slug("α") == "α"
    assert placeholder("eqsat/rules/NAME.rules") and not placeholder("eqsat/rules/matrix.rules")


def test_the_results_index_is_the_one_the_experiment_rows_make():
    """A new ``Experiment`` row cannot be missing from the docs: docs/results/README.md holds the index
    ``eqsat-lab experiment --index`` makes from the rows, and every row names the page of its results."""
    from experiments.commands.experiment import INDEX_BEGIN, INDEX_END, experiments, index

    rows = experiments()
    assert not [r.name for r in rows if not r.doc], "every experiment row names its page (doc=...)"
    text = (ROOT / "docs" / "results" / "README.md").read_text()
    held = text[text.index(INDEX_BEGIN):text.index(INDEX_END) + len(INDEX_END)]
    assert held == index(rows), "docs/results/README.md's index is stale: paste `eqsat-lab experiment --index`"
    for r in rows:
        page = ROOT / "docs" / "results" / r.doc.partition("#")[0]
        assert page.is_file(), f"{r.name}: doc page {page} does not exist"
