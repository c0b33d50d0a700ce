"""docs/findings.md is the one list of findings: it must name what the code pins, and nothing else.

What pins a defect lives in code: a ``KnownDefect`` in ``explore/known``, a strict xfail in the
tests, a standalone script under ``tests/zephon/repro``. Each is looked up there (the xfails by
parsing the test files with ``ast``, never by running them) and must be named on the page;
every path, node id and known defect the page names must exist. The links between the docs
are checked here too, since other pages link to the findings' anchors instead of repeating
them; and the README's plugin test must be the one ``tests/plugin/test_docs.py`` runs.
"""

from __future__ import annotations

import ast
import importlib
import pkgutil
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from zephon_chaos.explore import known
from zephon_chaos.explore.known import KNOWN_DEFECTS, KnownDefect

REPO = Path(__file__).resolve().parents[2]
PAGE = REPO / "docs" / "findings.md"
PACKAGE = REPO / "src" / "zephon_chaos"
TEST_ROOTS = ("tests", "examples")
REPRO = REPO / "tests" / "zephon" / "repro"
REPRO_HELPERS = {"__init__.py", "launch.py"}
"""Files of ``tests/zephon/repro`` that are neither a reproduction nor its test."""

NODE = re.compile(r"`((?:[\w-]+/)+[\w-]+\.py)::(\w+(?:::\w+)?)(?:\[[^\]`]*\])?`")
PATH = re.compile(r"`((?:tests|src|docs|benchmarks|scripts|examples)/[\w./-]+\.\w+)`")
KNOWN_MODULE = re.compile(r"`(explore/known/\w+\.py)`")
NAMED_DEFECT = re.compile(r"`([A-Z][A-Z0-9_]+)`\s+\(`([a-z0-9-]+)`")
ANCHOR = re.compile(r'<a id="([\w-]+)"></a>')
LINK = re.compile(r"\]\(([^)\s]+)\)")


def page() -> str:
    return PAGE.read_text(encoding="utf-8")


def entries(text: str) -> list[str]:
    """The page's entries: the text under each ``###`` heading."""
    return text.split("\n### ")[1:]


def defined_defects() -> Iterator[tuple[str, str, KnownDefect]]:
    """(module file under src/zephon_chaos, constant name, defect) of every ``KnownDefect``
    a module of ``explore/known`` defines."""
    for info in pkgutil.iter_modules(known.__path__, prefix=f"{known.__name__}."):
        module = importlib.import_module(info.name)
        file = Path(module.__file__ or "")
        own = top_level_names(file)
        for name, value in vars(module).items():
            if isinstance(value, KnownDefect) and name in own:
                # The imported package: the checkout's src/ or an installed wheel (tox).
                installed = Path(known.__file__).resolve().parents[2]
                yield file.resolve().relative_to(installed).as_posix(), name, value


def is_xfail(node: ast.AST) -> bool:
    """``pytest.mark.xfail`` or ``mark.xfail``, called or bare."""
    target = node.func if isinstance(node, ast.Call) else node
    return isinstance(target, ast.Attribute) and target.attr == "xfail"


def is_strict(mark: ast.AST) -> bool:
    """pyproject sets ``xfail_strict = true``: strict unless the mark says ``strict=False``."""
    if not isinstance(mark, ast.Call):
        return True
    return not any(
        k.arg == "strict" and isinstance(k.value, ast.Constant) and k.value.value is False
        for k in mark.keywords
    )


def marks_in(node: ast.AST) -> list[ast.AST]:
    """The xfail marks under ``node``, each once (a called mark is a Call around its Attribute)."""
    calls = [n for n in ast.walk(node) if isinstance(n, ast.Call) and is_xfail(n)]
    inner = {id(c.func) for c in calls}
    bare = [n for n in ast.walk(node) if isinstance(n, ast.Attribute) and is_xfail(n)]
    return [*calls, *(n for n in bare if id(n) not in inner)]


def is_pytestmark(stmt: ast.stmt) -> bool:
    return isinstance(stmt, ast.Assign) and any(
        isinstance(t, ast.Name) and t.id == "pytestmark" for t in stmt.targets
    )


def xfails_of(source: str, rel: str) -> tuple[list[str], int]:
    """The node ids (``rel::test`` or ``rel::Class::test``) of a test module's strict xfails,
    and how many xfail marks it holds where this reading does not look (a ``pytest.param``'s
    marks, say), so that none goes unseen."""
    tree = ast.parse(source)
    module_marks = [m for s in tree.body if is_pytestmark(s) for m in marks_in(s.value)]
    read = {id(m) for m in module_marks}
    tests: list[tuple[str, ast.AST, list[ast.AST]]] = []
    for stmt in tree.body:
        if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef):
            tests.append((stmt.name, stmt, module_marks))
        elif isinstance(stmt, ast.ClassDef):
            class_marks = [d for d in stmt.decorator_list if is_xfail(d)]
            read |= {id(m) for m in class_marks}
            tests += [
                (f"{stmt.name}::{f.name}", f, [*module_marks, *class_marks])
                for f in stmt.body
                if isinstance(f, ast.FunctionDef | ast.AsyncFunctionDef)
            ]
    found: list[str] = []
    for name, func, inherited in tests:
        own = [d for d in getattr(func, "decorator_list", []) if is_xfail(d)]
        read |= {id(m) for m in own}
        if name.rpartition("::")[2].startswith("test") and any(
            is_strict(m) for m in [*own, *inherited]
        ):
            found.append(f"{rel}::{name}")
    return found, sum(1 for m in marks_in(tree) if id(m) not in read)


def suite_modules() -> list[Path]:
    return sorted(p for root in TEST_ROOTS for p in (REPO / root).rglob("test_*.py"))


def strict_xfails() -> list[str]:
    found: list[str] = []
    for path in suite_modules():
        ids, unread = xfails_of(path.read_text(encoding="utf-8"), path.relative_to(REPO).as_posix())
        assert unread == 0, (
            f"{path.relative_to(REPO)} holds an xfail mark outside a test's decorators or the "
            "module's pytestmark (a pytest.param's marks?): teach xfails_of to read it"
        )
        found += ids
    return found


def top_level_names(path: Path) -> set[str]:
    """Functions, classes (and their methods as ``Class::method``) and assigned names."""
    names: set[str] = set()
    for stmt in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef):
            names.add(stmt.name)
        elif isinstance(stmt, ast.ClassDef):
            names.add(stmt.name)
            names |= {f"{stmt.name}::{m.name}" for m in stmt.body if hasattr(m, "name")}
        elif isinstance(stmt, ast.Assign | ast.AnnAssign):
            targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
            names |= {t.id for t in targets if isinstance(t, ast.Name)}
    return names


def resolve(path: str) -> Path:
    """A path as the page writes it: from the repository root, or under src/zephon_chaos."""
    rooted = REPO / path
    return rooted if rooted.exists() or path.startswith(TEST_ROOTS) else PACKAGE / path


SAMPLE = """
import pytest

pytestmark = pytest.mark.cpu


@pytest.mark.slow
@pytest.mark.xfail(strict=True, reason="a defect")
def test_pinned(): ...


@pytest.mark.xfail(reason="strict by pyproject's xfail_strict")
def test_pinned_by_default(): ...


@pytest.mark.xfail(strict=False, reason="may pass")
def test_loose(): ...


def test_plain(): ...


@pytest.mark.xfail
class TestPinned:
    def test_method(self): ...


@pytest.mark.parametrize("x", [pytest.param(1, marks=pytest.mark.xfail)])
def test_param(x): ...
"""


def test_the_xfail_reading_finds_each_kind_of_mark_and_owns_up_to_the_rest() -> None:
    """What the next test relies on: a reading that missed a mark would pass on nothing."""
    found, unread = xfails_of(SAMPLE, "t.py")
    assert found == [
        "t.py::test_pinned",
        "t.py::test_pinned_by_default",
        "t.py::TestPinned::test_method",
    ]
    assert unread == 1  # the pytest.param's mark: strict_xfails() refuses a file that has one


def test_every_strict_xfail_is_named_by_its_node_id() -> None:
    named = {f"{m.group(1)}::{m.group(2)}" for m in NODE.finditer(page())}
    missing = [node for node in strict_xfails() if node not in named]
    assert missing == [], f"docs/findings.md does not name these strict xfails: {missing}"


DEFINED = list(defined_defects())


@pytest.mark.parametrize(("module", "name", "defect"), DEFINED, ids=[d.id for _, _, d in DEFINED])
def test_every_known_defect_is_named_with_its_module(
    module: str, name: str, defect: KnownDefect
) -> None:
    holding = [e for e in entries(page()) if re.search(rf"`{name}`\s+\(`{defect.id}`", e)]
    assert holding, f"docs/findings.md names no `{name}` (`{defect.id}`)"
    assert f"`{module}`" in holding[0], f"its entry does not name `{module}`"


def test_every_known_defect_is_in_the_summary_table() -> None:
    rows = [line for line in page().splitlines() if line.startswith("| [")]
    listed = {token for row in rows for token in re.findall(r"`([a-z0-9-]+)`", row.split("|")[-2])}
    assert listed == {d.id for d in KNOWN_DEFECTS}


def test_every_reproduction_script_is_named() -> None:
    scripts = sorted(
        p.relative_to(REPO).as_posix()
        for p in REPRO.glob("*.py")
        if not p.name.startswith("test_") and p.name not in REPRO_HELPERS
    )
    text = page()
    assert scripts, "no reproduction scripts found: has tests/zephon/repro moved?"
    missing = [s for s in scripts if f"`{s}`" not in text]
    assert missing == [], f"docs/findings.md does not name these reproductions: {missing}"


def test_every_path_the_page_names_exists() -> None:
    text = page()
    named = {m.group(1) for m in PATH.finditer(text)}
    named |= {f"src/zephon_chaos/{m.group(1)}" for m in KNOWN_MODULE.finditer(text)}
    gone = sorted(p for p in named if not (REPO / p).exists())
    assert gone == [], f"docs/findings.md names files that do not exist: {gone}"


def test_every_node_id_the_page_names_exists() -> None:
    gone: list[str] = []
    for m in NODE.finditer(page()):
        path = resolve(m.group(1))
        if not path.is_file() or m.group(2) not in top_level_names(path):
            gone.append(f"{m.group(1)}::{m.group(2)}")
    assert gone == [], f"docs/findings.md names what does not exist: {gone}"


def test_every_known_defect_the_page_names_exists() -> None:
    defined = {name: d.id for _, name, d in DEFINED}
    wrong = [
        f"{name} ({id_})" for name, id_ in NAMED_DEFECT.findall(page()) if defined.get(name) != id_
    ]
    assert wrong == [], f"docs/findings.md names known defects that are not so: {wrong}"


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def anchors(doc: Path) -> set[str]:
    text = doc.read_text(encoding="utf-8")
    found = set(ANCHOR.findall(text))
    seen: dict[str, int] = {}
    prose = re.sub(r"^```.*?^```", "", text, flags=re.M | re.S)
    for line in re.findall(r"^#{1,6} (.+)$", prose, re.M):
        base = slug(line)
        found.add(base if base not in seen else f"{base}-{seen[base]}")
        seen[base] = seen.get(base, 0) + 1
    return found


DOCS = sorted([REPO / "README.md", REPO / "CHANGELOG.md", *(REPO / "docs").glob("*.md")])


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.relative_to(REPO).as_posix())
def test_every_link_between_the_docs_resolves(doc: Path) -> None:
    broken: list[str] = []
    for target in LINK.findall(doc.read_text(encoding="utf-8")):
        if re.match(r"[a-z]+:", target):
            continue
        file, _, anchor = target.partition("#")
        path = (doc.parent / file).resolve() if file else doc
        if not path.exists() or (anchor and path.suffix == ".md" and anchor not in anchors(path)):
            broken.append(target)
    assert broken == [], f"{doc.relative_to(REPO)} links to what does not exist: {broken}"


FENCE = re.compile(r'^```(\w+)(?: title="([^"]+)")?\n(.*?)^```$', re.MULTILINE | re.DOTALL)


def test_the_readmes_plugin_test_is_the_recipe_test_the_suite_runs() -> None:
    """docs/recipes.md's files run in a fresh project (test_docs.py); the README shows the
    test file, so it must be that one, character for character."""
    readme = [
        text
        for lang, _, text in FENCE.findall((REPO / "README.md").read_text())
        if lang == "python"
    ]
    recipes = FENCE.findall((REPO / "docs" / "recipes.md").read_text())
    tested = {title: text for _, title, text in recipes if title}
    assert readme == [tested["tests/test_my_recipe.py"]]
