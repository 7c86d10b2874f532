"""What a user reads is true and says nothing of our own process.

- No internal issue number ("issue 27", "issues 28, 29") in README.md, CHANGELOG.md, docs/*.md,
  the patch catalogue (`mambawin patches`), any command's help, any string mambawin prints or
  writes into a patched tree. Upstream's references (`state-spaces/mamba#986`, `PR #93`) are
  facts about upstream and stay.
- Each measured figure README quotes (62.6 s, 0.474×, 1.8 GB) is one docs/benchmarks.md records.
- Claims that were once stale stay fixed: the C++ standard is read from torch's headers, both
  packages have a stable port, the toolchain's size is the one measured.
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from mambawin.cli import app

ROOT = Path(__file__).resolve().parents[1]
ISSUE = re.compile(r"\bissues? #?\d+|\bissues? \d+(?:, \d+)*", re.IGNORECASE)
USER_DOCS = [ROOT / "README.md", ROOT / "CHANGELOG.md", *sorted((ROOT / "docs").glob("*.md"))]


def issue_numbers(text: str) -> list[str]:
    return [m.group(0) for m in ISSUE.finditer(text)]


@pytest.mark.parametrize("doc", USER_DOCS, ids=[p.name for p in USER_DOCS])
def test_no_doc_names_an_internal_issue(doc: Path) -> None:
    assert issue_numbers(doc.read_text(encoding="utf-8")) == []


@pytest.mark.parametrize("package", ["mamba-ssm", "causal-conv1d"])
def test_the_patch_catalogue_names_no_internal_issue(package: str) -> None:
    result = CliRunner().invoke(app, ["patches", "--package", package, "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout) and issue_numbers(result.stdout) == []


def _commands(command: object, path: tuple[str, ...] = ()) -> Iterator[tuple[str, ...]]:
    yield path
    for name, sub in getattr(command, "commands", {}).items():  # a group's commands
        yield from _commands(sub, (*path, name))


def test_no_help_names_an_internal_issue() -> None:
    root = typer.main.get_command(app)
    paths = list(_commands(root))
    assert len(paths) > 10
    for path in paths:
        result = CliRunner().invoke(app, [*path, "--help"], env={"COLUMNS": "200"})
        assert result.exit_code == 0, (path, result.output)
        assert issue_numbers(result.output) == [], path


def _docstrings(tree: ast.AST) -> set[int]:
    """The ids of the nodes that are docstrings (read by developers, never printed)."""
    found: set[int] = set()
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(body, list) and body and isinstance(body[0], ast.Expr):
            value = body[0].value
            if isinstance(value, ast.Constant) and isinstance(value.value, str):
                found.add(id(value))
    return found


def test_no_string_mambawin_prints_or_writes_names_an_internal_issue() -> None:
    found: list[str] = []
    for path in sorted((ROOT / "mambawin").rglob("*")):
        if path.suffix == ".py":
            tree = ast.parse(path.read_text(encoding="utf-8"))
            skip = _docstrings(tree)
            for node in ast.walk(tree):
                is_text = isinstance(node, ast.Constant) and isinstance(node.value, str)
                if is_text and id(node) not in skip and issue_numbers(node.value):
                    found.append(f"{path.relative_to(ROOT)}:{node.lineno}")
        # data files a patch writes into the user's tree, or mambawin prints
        elif path.suffix in (".in", ".txt", ".md", ".toml", ".json") and path.is_file():
            text = path.read_text(encoding="utf-8", errors="replace")
            found += [str(path.relative_to(ROOT))] if issue_numbers(text) else []
    assert found == []


def test_the_scan_finds_what_it_should() -> None:
    for text in ("issue 27", "(issues 28, 29)", "Issue 24 review", "issue #12"):
        assert issue_numbers(text), text
    for text in ("state-spaces/mamba#986", "upstream PR #93", "the issue form", "tissue 3"):
        assert issue_numbers(text) == [], text


# ---- README's figures are benchmarks.md's ------------------------------------------------------

# A measured figure: a number with a unit of time, a ratio, a size or a share.
FIGURE = re.compile(r"(?<![\w.])(\d[\d,]*(?:\.\d+)?)\s?(×|s\b|min\b|%|GB\b|MB\b|GiB\b|MiB\b)")
# README's Install and Run-the-tests sections are .ci/run's (run there, timed there).
CI_SECTIONS = ("## Install", "## Run the tests")


def readme_figures(text: str) -> list[str]:
    """Each figure README quotes outside its CI sections, as `<number> <unit>` (× joined)."""
    kept: list[str] = []
    skipping = False
    for line in text.splitlines():
        if line.startswith("## "):
            skipping = line.startswith(CI_SECTIONS)
        if not skipping:
            kept.append(line)
    return [f"{n}{u}" if u == "×" else f"{n} {u}" for n, u in FIGURE.findall("\n".join(kept))]


def _plain(text: str) -> str:
    return re.sub(r"\s+", " ", text.replace("**", ""))


def test_every_figure_readme_quotes_is_read_from_benchmarks() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    benchmarks = _plain((ROOT / "docs" / "benchmarks.md").read_text(encoding="utf-8"))
    figures = readme_figures(readme)
    assert "0.474×" in figures and "62.6 s" in figures  # the pool's, quoted
    missing = [f for f in figures if f not in benchmarks]
    assert missing == [], f"README quotes figures docs/benchmarks.md does not record: {missing}"


def test_a_figure_not_in_benchmarks_is_found() -> None:
    assert readme_figures("## Why\nthe pool took 77.7 s (0.70×)\n") == ["77.7 s", "0.70×"]
    assert readme_figures("## Install\ntakes 3 min\n## Next\n") == []


# ---- claims that were stale ----------------------------------------------------------------------


def _all_user_text() -> str:
    catalogue = "".join(
        CliRunner().invoke(app, ["patches", "--package", p, "--json"]).stdout
        for p in ("mamba-ssm", "causal-conv1d")
    )
    return "\n".join([*(p.read_text(encoding="utf-8") for p in USER_DOCS), catalogue])


def test_no_text_says_every_torch_from_2_10_needs_cxx20() -> None:
    # the compiler-flags patch and doctor read the standard from torch's headers: torch 2.11's
    # take C++17 (docs/benchmarks.md §3), 2.14's and 2.15's demand C++20
    text = _plain(_all_user_text())
    assert (
        re.search(r"torch 2\.10\+? (headers )?needs? C\+\+20|from torch 2\.10 demand", text) is None
    )
    assert "Under torch 2.11 the same patch chose C++17" in text


def test_build_md_says_both_packages_have_a_stable_port() -> None:
    text = _plain((ROOT / "docs" / "build.md").read_text(encoding="utf-8"))
    assert "Only causal-conv1d" not in text
    assert "mamba-ssm from v2.2.3 and causal-conv1d from v1.5.0" in text


def test_the_windows_toolchain_has_one_size_the_measured_one() -> None:
    benchmarks = (ROOT / "docs" / "benchmarks.md").read_text(encoding="utf-8")
    measured = re.search(
        r"toolchain windows --setup --root W --json +# [^;]+; ([\d.]+ GB)", benchmarks
    )
    assert measured is not None
    for doc in USER_DOCS:
        if doc.name == "benchmarks.md":
            continue
        for line in doc.read_text(encoding="utf-8").splitlines():
            if "toolchain" in line.lower():
                for size in re.findall(r"\d+(?:\.\d+)? GB", line):
                    assert size == measured.group(1), f"{doc.name}: {line.strip()}"


PROCESS = re.compile(r"\bthe issue(?:'s)?\b|\bdevice time\b|\bsessions?\b", re.IGNORECASE)


@pytest.mark.parametrize("doc", USER_DOCS, ids=[p.name for p in USER_DOCS])
def test_no_doc_speaks_of_how_it_was_made(doc: Path) -> None:
    # "the issue's goal", "the session's device time": our process, not what mambawin does
    found = [m.group(0) for m in PROCESS.finditer(doc.read_text(encoding="utf-8"))]
    assert found == []
