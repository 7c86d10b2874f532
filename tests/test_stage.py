"""The stage contract is one root module; every stage narrates through it, by keyword."""

from __future__ import annotations

import ast
from pathlib import Path

from mambawin import stage
from tests.test_layout import import_graph

PACKAGE = Path(__file__).resolve().parents[1] / "mambawin"

# The reporter is the subject of these (they wrap it), not where they narrate.
WRAPPERS = {
    ("mambawin/stage.py", "timed"),
    ("mambawin/stage.py", "__init__"),
    ("mambawin/builder/together.py", "__init__"),  # NamedReporter: one package's reporter
}
# Private helpers of the wine backends and the spec runner, reworked by their own change: they
# take the reporter positionally until then. A new function may not join them.
NOT_YET = {
    ("mambawin/check/pipeline.py", "_front"),
    ("mambawin/check/pipeline.py", "_compile"),
    ("mambawin/cross/pipeline.py", "_compile"),
    ("mambawin/team/runner.py", "_run_group"),
    ("mambawin/team/runner.py", "_build_cell"),
    ("mambawin/cli/build.py", "run"),
}


def positional_reporters(root: Path) -> set[tuple[str, str]]:
    """(file, function) for every function under root that takes `reporter` positionally."""
    found: set[tuple[str, str]] = set()
    for path in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and any(
                a.arg == "reporter" for a in (*node.args.posonlyargs, *node.args.args)
            ):
                found.add((path.relative_to(root.parent).as_posix(), node.name))
    return found


def test_a_reporter_is_passed_by_keyword() -> None:
    assert positional_reporters(PACKAGE) - WRAPPERS - NOT_YET == set()


def test_the_keyword_rule_sees_a_positional_reporter(tmp_path: Path) -> None:
    package = tmp_path / "mambawin"
    package.mkdir()
    (package / "a.py").write_text(
        "def run(options, reporter): ...\ndef fine(options, *, reporter=None): ...\n",
        encoding="utf-8",
    )
    assert positional_reporters(package) == {("mambawin/a.py", "run")}


def test_the_contract_is_one_root_module_below_every_stage() -> None:
    """Reporter, its records and the status vocabulary live in mambawin.stage, which imports no
    stage: verify and the views narrate without importing the build stage."""
    graph = import_graph()
    assert "mambawin.builder.reporter" not in graph
    assert "mambawin.status" not in graph
    assert {m for m in graph["mambawin.stage"] if m.startswith("mambawin.")} == set()
    narrating = [m for m in graph if m.startswith(("mambawin.verify", "mambawin.ui"))]
    assert [
        f"{m} -> {t}" for m in narrating for t in graph[m] if t.startswith("mambawin.builder")
    ] == ["mambawin.ui.progress -> mambawin.builder.results"]  # the build result it draws


def test_the_quiet_reporter_is_a_reporter_and_says_nothing() -> None:
    quiet: stage.Reporter = stage.QuietReporter()
    with quiet.step("x"):
        quiet.note("n")
        quiet.progress(stage.NinjaStatus(1, 2, "a.cu"))
        quiet.finished(stage.Finished("a", stage.Status.OK))
    steps = stage.timed(quiet)
    with steps("fetch"):
        pass
    assert set(steps.durations) == {"fetch"}
    assert stage.timed(steps) is steps
