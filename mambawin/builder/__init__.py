"""The pieces of `mambawin build`: build key, workspace, environment, compile; `run` is the one
entry of every build (builder/backends.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from mambawin.builder.backends import Outcome
    from mambawin.builder.reporter import Reporter
    from mambawin.builder.request import BuildRequest, Tools


def run(
    request: BuildRequest,
    *,
    plan_only: bool = False,
    tools: Tools | None = None,
    reporter: Reporter | None = None,
) -> Outcome:
    """Validate a request and run its backend's plan or build (builder/backends.py)."""
    from mambawin.builder.backends import run as run_request

    return run_request(request, plan_only=plan_only, tools=tools, reporter=reporter)
