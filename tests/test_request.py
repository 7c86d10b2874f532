"""One request, declared once: each backend's request survives request → argv → CLI → request;
the docs' option table and synopsis are the declaration's own; every stage entry takes
(request, *, tools=None, reporter=None); validation works on fields, on the request's backend."""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import Any

import pytest
import typer.main

from mambawin import dispatch
from mambawin.archs import parse_archs
from mambawin.builder.faces import from_params, option_table, synopsis, to_argv
from mambawin.builder.request import (
    BUILD_OPTIONS,
    CROSS_WINDOWS,
    FIELD_OPTIONS,
    NATIVE,
    WINDOWS,
    WINDOWS_CHECK,
    BuildRequest,
    command_of,
    set_fields,
)
from mambawin.cli import app
from mambawin.cli.options import split_params, windows_root_of
from mambawin.errors import UsageError
from mambawin.packages import CAUSAL_CONV1D

ROOT = Path(__file__).resolve().parent.parent

# A request per backend with every field that backend applies set away from its default.
REQUESTS = {
    NATIVE: BuildRequest(
        ref="v2.2.6",
        repo="https://example.invalid/mamba.git",
        source_from="index",
        archs=parse_archs("86;90+PTX"),
        jobs=3,
        abi="torch",
        arch_groups="off",
        out=Path("dist/wheels"),
        nvcc_threads=2,
        keep_complex=True,
        skip_patches=("nvcc-threads", "math-defines"),
        drop=("triton",),
        keep=("einops", "transformers"),
        local_version="none",
        cache=False,
        force=True,
        source=Path("src/mamba"),
        with_="causal-conv1d==v1.5.2",
        with_repo="/srv/causal-conv1d",
    ),
    CROSS_WINDOWS: BuildRequest(
        ref="v1.5.3.post1",
        repo="/srv/causal-conv1d",
        package=CAUSAL_CONV1D,
        source_from="git",
        archs=parse_archs("90"),
        jobs=5,
        abi="stable",
        arch_groups="off",
        out=Path("out"),
        nvcc_threads=4,
        platform=WINDOWS,
        windows_root=Path("tc"),
        backend=CROSS_WINDOWS,
    ),
    WINDOWS_CHECK: BuildRequest(
        ref="v2.2.6",
        repo="/srv/mamba",
        source_from="index",
        archs=parse_archs("86"),
        jobs=2,
        windows_root=Path("tc"),
        stock=True,
        cpython=Path("cpython"),
        units=("selective_scan.cpp", "causal_conv1d.cpp"),
        backend=WINDOWS_CHECK,
    ),
}


def _parsed(argv: list[str]) -> BuildRequest:
    """The request mambawin's real CLI parses from argv (`build ...` or `check ...`)."""
    name, *args = argv
    command = typer.main.get_command(app).commands[name]  # type: ignore[attr-defined]
    with command.make_context(name, args) as ctx:
        params, _, _ = split_params(dict(ctx.params))
    if name == "check":
        params["windows_root"] = windows_root_of(params.get("windows_root"), params.pop("old_root"))
    return from_params(name, params)


@pytest.mark.parametrize("backend", list(REQUESTS))
def test_each_backends_request_survives_argv_and_the_cli(
    backend: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("MAMBAWIN_SOURCE", raising=False)
    request = REQUESTS[backend]
    applied = {o.flag for o in FIELD_OPTIONS if backend in o.backends}
    set_here = {o.flag for o in set_fields(request)}
    # the package keeps its default in the native sample (--with needs mamba-ssm)
    assert applied - set_here <= {"--package", "--abi"}, "set every field the backend applies"
    argv = to_argv(request)
    assert argv[0] == command_of(backend)
    assert _parsed(argv) == request


def test_a_default_is_left_out_of_argv_and_parses_back_to_itself(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("MAMBAWIN_SOURCE", raising=False)
    assert to_argv(BuildRequest()) == ["build"]
    assert _parsed(["build"]) == BuildRequest()
    assert _parsed(["check"]) == BuildRequest(backend=WINDOWS_CHECK)


def test_the_docs_option_table_and_synopsis_are_the_declarations_own() -> None:
    doc = (ROOT / "docs" / "build.md").read_text(encoding="utf-8")
    assert option_table() in doc, "docs/build.md's option table is stale: regenerate it"
    assert f"```\n{synopsis('build')}```" in doc, "docs/build.md's synopsis is stale"
    for declared in BUILD_OPTIONS:  # a new option gets a row
        assert f"| `{declared.flag}` |" in option_table()


def _entries() -> list[Any]:
    from mambawin.builder import pipeline

    found: list[Any] = [dispatch.run, pipeline.plan, pipeline.build]
    for backend in dispatch.ALL_BACKENDS.values():
        found += [backend.plan, backend.build]
    return found


@pytest.mark.parametrize("entry", _entries(), ids=lambda f: getattr(f, "__qualname__", str(f)))
def test_every_stage_entry_takes_the_request_then_tools_and_reporter_by_keyword(entry: Any) -> None:
    params = list(inspect.signature(entry).parameters.values())
    first, rest = params[0], params[1:]
    assert first.name == "request" and first.kind is first.POSITIONAL_OR_KEYWORD
    assert all(p.kind is p.KEYWORD_ONLY for p in rest), rest
    named = {p.name: p.default for p in rest}
    assert named.get("tools", "absent") is None and named.get("reporter", "absent") is None


def test_a_field_is_judged_on_the_requests_own_backend() -> None:
    """The spec's judge validates the request a cell is; a cross request that sets what only the
    native build applies is refused by the flag, for the cross backend."""
    cross = REQUESTS[CROSS_WINDOWS]
    for field, value in [("keep_complex", True), ("drop", ("triton",)), ("stock", True)]:
        refused = BuildRequest(**{**_values(cross), field: value})
        reason = dispatch.judge(refused)
        flag = next(o.flag for o in FIELD_OPTIONS if o.name == field)
        assert flag in reason and CROSS_WINDOWS in reason, reason
    with pytest.raises(UsageError, match="--stock"):
        dispatch.validate(BuildRequest(stock=True))  # the native build applies no --stock


def test_a_request_that_names_no_backend_is_a_callers_bug() -> None:
    with pytest.raises(ValueError, match="unknown backend"):
        dispatch.validate(BuildRequest(backend="wasm"))


def _values(request: BuildRequest) -> dict[str, Any]:
    return {o.name: getattr(request, o.name) for o in FIELD_OPTIONS} | {"backend": request.backend}


def test_the_build_and_check_commands_hold_no_branch_on_the_backend() -> None:
    """The CLI parses into a request and calls dispatch.run: which backend runs is the
    request's, never a choice the command makes."""
    import ast

    for name in ("build.py", "check.py"):
        tree = ast.parse((ROOT / "mambawin" / "cli" / name).read_text(encoding="utf-8"))
        names = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
        names |= {n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute)}
        chosen = names & {"NATIVE", "CROSS_WINDOWS", "WINDOWS_CHECK", "backend", "platform"}
        assert not chosen, f"cli/{name} chooses a backend: {sorted(chosen)}"


def test_a_spec_cell_is_judged_on_the_backend_that_builds_it(tmp_path: Path) -> None:
    """The runner builds a cell natively; `ci github --build-on linux` cross-builds it: the
    same cell's request on each backend, each judged by that backend's validator."""
    from mambawin.team.matrix import cell_request, expand
    from mambawin.team.spec_reader import parse_spec

    text = (
        'python = ["3.12"]\nplatforms = ["win_amd64"]\narchs = ["90"]\n'
        '[[package]]\nname = "causal-conv1d"\nref = "v1.5.3.post1"\nversion = "1.5.3.post1"\n'
        '[[torch]]\nversion = "2.11.0"\ncuda = "13.0"\n[options]\nabi = "stable"\n'
    )
    cell = expand(parse_spec(text, tmp_path / "team.toml"))[0]
    spec = parse_spec(text, tmp_path / "team.toml")
    native, cross = cell_request(cell, spec), cell_request(cell, spec, CROSS_WINDOWS)
    assert (native.backend, cross.backend, cross.platform) == (NATIVE, CROSS_WINDOWS, WINDOWS)
    assert dispatch.judge(native) == "" and dispatch.judge(cross) == ""
    dropping = parse_spec(text + 'drop = ["triton"]\n', tmp_path / "team.toml")
    assert dispatch.judge(cell_request(cell, dropping)) == ""  # the native build applies it
    reason = dispatch.judge(cell_request(cell, dropping, CROSS_WINDOWS))
    assert "--drop" in reason and CROSS_WINDOWS in reason, reason
