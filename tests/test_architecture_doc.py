"""docs/architecture.md is read from the code: its tree names every package and module there is
and none that is not, in the layer order tests/test_layout.py enforces; each module file and each
`module.name` a package's row gives exists (a rename that forgets the map fails here); its module
sizes section names exactly the modules over the bound."""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import pytest

from tests.test_layout import ARCHITECTURE, declared_layers, module_name

ROOT = Path(__file__).resolve().parents[1]
DOC = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
PACKAGE = ROOT / "mambawin"
_TICKS = re.compile(r"`([^`]+)`")
_DOTTED = re.compile(r"^([a-z_]+)\.([A-Za-z_][A-Za-z0-9_]*)")


def rows() -> list[tuple[str, str]]:
    """(the package or root module a table row is about, the rest of the row)."""
    found = []
    for line in DOC.splitlines():
        cells = line.split("|")
        if len(cells) < 4 or not cells[1].strip().startswith("`"):
            continue
        owner = _TICKS.findall(cells[1])[0]
        found.append((owner, "|".join(cells[2:])))
    return found


def test_the_doc_has_rows_for_the_stages() -> None:
    owners = {owner for owner, _ in rows()}
    assert {"toolchain/", "builder/", "verify/", "index/", "team/", "errors.py"} <= owners


@pytest.mark.parametrize(("owner", "text"), rows(), ids=[o for o, _ in rows()])
def test_every_named_module_and_name_exists(owner: str, text: str) -> None:
    if not owner.endswith("/"):
        assert (PACKAGE / owner).is_file(), f"{owner} does not exist"
        return
    package = PACKAGE / owner.rstrip("/")
    assert package.is_dir(), f"{owner} does not exist"
    for token in _TICKS.findall(text):
        if re.fullmatch(r"[a-z_]+\.py", token):  # a file of this package (paths may be upstream's)
            assert (package / token).is_file(), f"{owner}{token} does not exist"
            continue
        dotted = _DOTTED.match(token)
        if dotted is None:
            continue
        module, name = dotted.groups()
        if not ((package / f"{module}.py").is_file() or (package / module).is_dir()):
            continue  # not a module of this package (e.g. torch.version.cuda)
        imported = importlib.import_module(f"mambawin.{owner.rstrip('/')}.{module}")
        assert hasattr(imported, name), f"{owner}: `{token}` names nothing"


# ---- the tree: every package and module, in layer order ---------------------------------------

_MODULE = re.compile(r"\b(\w+)\.py\b")
_GROUP = re.compile(r"\b(\w+)/ \(")


def tree_block(text: str) -> str:
    """The fenced block that starts with `mambawin/`."""
    return text.split("```\nmambawin/\n", 1)[1].split("```", 1)[0]


def named_in_tree(tree: str) -> tuple[list[str], set[str]]:
    """The packages in the order the tree lists them, and every module and subpackage it names.

    A line indented two spaces starts a package (`  builder/   pipeline.py, ...`) or lists root
    modules; deeper lines continue it. In a package, `name.py` is one of its modules and
    `sub/ (a.py, b.py)` a subpackage with its modules.
    """
    packages: list[str] = []
    named: set[str] = set()
    blocks = re.split(r"^(?=  \S)", tree, flags=re.MULTILINE)
    for block in (b for b in blocks if b.strip()):
        head = re.match(r"  (\w+)/", block)
        base = f"mambawin.{head[1]}" if head else "mambawin"
        if head:
            packages.append(base)
            block = block[head.end() :]
        named |= _names(block, base)
    return packages, named


def _names(text: str, base: str) -> set[str]:
    """Modules text names under base; a `sub/ (...)` group names base.sub and its modules."""
    found: set[str] = set()
    while group := _GROUP.search(text):
        inner, end = _parenthesised(text, group.end())
        sub = f"{base}.{group[1]}"
        found |= {sub} | _names(inner, sub)
        text = text[: group.start()] + text[end:]
    return found | {f"{base}.{name}" for name in _MODULE.findall(text)}


def _parenthesised(text: str, start: int) -> tuple[str, int]:
    """The text up to the parenthesis that closes the one before start, and the index after it."""
    depth = 1
    for index in range(start, len(text)):
        depth += {"(": 1, ")": -1}.get(text[index], 0)
        if depth == 0:
            return text[start:index], index + 1
    raise AssertionError(f"unclosed parenthesis in the tree: {text[start - 40 : start]!r}")


def existing() -> tuple[set[str], set[str]]:
    """The packages directly under mambawin/, and every module and subpackage below it."""
    top = {module_name(p.parent / "__init__.py") for p in PACKAGE.glob("*/__init__.py")}
    everything = {module_name(p) for p in PACKAGE.rglob("*.py")} - {"mambawin"}
    return top, everything


def test_the_tree_names_every_package_and_module_and_none_that_is_missing() -> None:
    packages, named = named_in_tree(tree_block(ARCHITECTURE.read_text(encoding="utf-8")))
    top, everything = existing()
    assert sorted(set(packages) - top) == [], "the tree names packages that do not exist"
    assert sorted(named - everything) == [], "the tree names modules that do not exist"
    assert sorted(everything - named - top) == [], "the tree does not name these modules"
    assert sorted(top - set(packages)) == [], "the tree does not name these packages"


def test_the_tree_lists_the_packages_in_the_declared_layer_order() -> None:
    text = ARCHITECTURE.read_text(encoding="utf-8")
    packages, _ = named_in_tree(tree_block(text))
    layered = [m for layer in declared_layers(text) for m in layer if m in set(packages)]
    assert packages == layered


SIZE_BOUND = 350


def named_as_large(text: str) -> set[str]:
    """The modules the `## Module sizes` section names (`builder/pipeline.py`)."""
    section = text.split("\n## Module sizes\n", 1)[1].split("\n## ", 1)[0]
    return set(re.findall(r"`([\w/]+\.py)`", section))


def test_the_module_sizes_section_names_exactly_the_modules_over_the_bound() -> None:
    large = {
        str(p.relative_to(PACKAGE))
        for p in PACKAGE.rglob("*.py")
        if len(p.read_text(encoding="utf-8").splitlines()) > SIZE_BOUND
    }
    named = named_as_large(ARCHITECTURE.read_text(encoding="utf-8"))
    # mambawin's modules only (a root module by its own name): not the test that reads this, nor
    # a bare template filler's name
    named = {
        n for n in named if ("/" in n or (PACKAGE / n).is_file()) and not n.startswith("tests/")
    }
    assert sorted(large - named) == [], f"over {SIZE_BOUND} lines, not in ## Module sizes"
    assert sorted(named - large) == [], f"in ## Module sizes, not over {SIZE_BOUND} lines"


def test_the_tree_reader_sees_groups_roots_and_strays() -> None:
    tree = (
        "  cli/       app.py (the app), build.py\n"
        "             runners/ (run inside (an env): smoke.py, ops.py), gone.py\n"
        "  wheel/     info.py\n"
        "  errors.py  proc.py\n"
    )
    packages, named = named_in_tree(tree)
    assert packages == ["mambawin.cli", "mambawin.wheel"]
    assert named == {
        "mambawin.cli.app",
        "mambawin.cli.build",
        "mambawin.cli.runners",
        "mambawin.cli.runners.smoke",
        "mambawin.cli.runners.ops",
        "mambawin.cli.gone",
        "mambawin.wheel.info",
        "mambawin.errors",
        "mambawin.proc",
    }
