"""proc.reason: the one rule for the line of a tool's output a one-line error quotes."""

from __future__ import annotations

from mambawin import proc
from mambawin.fetch.git import reason as git_reason


def test_the_marked_line_wins_first_or_last_without_its_marker() -> None:
    out = "cloning...\nfatal: repository not found\nerror: could not fetch\ndone\n"
    assert proc.reason(out, markers=("fatal:", "error:"), pick="first") == "repository not found"
    assert proc.reason(out, markers=("fatal:", "error:")) == "could not fetch"
    assert proc.reason(out, markers=("error",), strip_marker=False) == "error: could not fetch"
    assert git_reason(out) == "repository not found"  # git's first reason, not its echo


def test_without_a_marked_line_the_last_line_else_the_fallback() -> None:
    assert proc.reason("a\n\n  b  \n\n", markers=("ERROR:",)) == "b"
    assert proc.reason("  \n", none="pip printed nothing") == "pip printed nothing"
    assert proc.last_line("x\ny\n") == "y"
    assert proc.reason("ERROR: No matching distribution\n", markers=("error:",)) == (
        "No matching distribution"
    )
