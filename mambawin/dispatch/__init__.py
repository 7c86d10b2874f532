"""One entry for every build: a request validated, then run on its backend.

The registry of backends sits above them (cibuildwheel's `ALL_PLATFORM_MODULES` over its
platform modules): the native backend is the builder's own (builder/backends.py), the two wine
backends run cross/ and check/ (dispatch/wine.py). Nothing below this package imports it, so the
backends stay siblings and the builder never reaches up to them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from mambawin.builder.backends import Backend, NativeBackend, Outcome, refuse_fields
from mambawin.builder.rebuild import native_facts
from mambawin.builder.rebuild_target import MachineFacts
from mambawin.builder.request import CROSS_WINDOWS, NATIVE, WINDOWS_CHECK, BuildRequest, Tools
from mambawin.dispatch.wine import CheckBackend, CrossBackend, cross_facts
from mambawin.errors import UsageError

if TYPE_CHECKING:
    from mambawin.stage import Reporter

ALL_BACKENDS: Mapping[str, Backend] = {
    NATIVE: NativeBackend(),
    CROSS_WINDOWS: CrossBackend(),
    WINDOWS_CHECK: CheckBackend(),
}


def run(
    request: BuildRequest,
    *,
    plan_only: bool = False,
    tools: Tools | None = None,
    reporter: Reporter | None = None,
) -> Outcome:
    """The one entry of every build: validate the request, then its backend's plan or build."""
    backend = validate(request)
    stage = backend.plan if plan_only else backend.build
    return stage(request, tools=tools, reporter=reporter)


def validate(request: BuildRequest) -> Backend:
    """The one check before any work: every field set away from its default that the backend
    does not apply, refused by its flag; then the backend's own inputs."""
    chosen = ALL_BACKENDS.get(request.backend)
    if chosen is None:  # a caller's bug: the request names no backend there is
        raise ValueError(f"unknown backend {request.backend!r}")
    refuse_fields(request)
    chosen.check_inputs(request)
    return chosen


def machine_facts(request: BuildRequest, tools: Tools | None = None) -> MachineFacts:
    """What a build of request on this machine would record as its toolchain (its backend's
    probes): what `rebuild` checks against a published wheel's provenance before any work."""
    if request.backend == CROSS_WINDOWS:
        return cross_facts(request)
    return native_facts(request, tools)


def judge(request: BuildRequest) -> str:
    """'' when its backend would take this request, else its own one-line refusal: what a spec
    cell build would refuse is impossible, for the reason build gives."""
    try:
        validate(request)
    except UsageError as exc:
        return str(exc)
    return ""
