"""`mambawin toolchain windows`: the pip-fetched Windows compilers, set up into mambawin's cache
(used natively on Windows, under wine on Linux)."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from mambawin.cli.app import command, examples, fail_json, group, print_json
from mambawin.toolchain.wine_setup import SETUP_CUDA, SETUP_TORCH
from mambawin.ui.console import console

if TYPE_CHECKING:
    from mambawin.toolchain.download import DownloadStatus

toolchain_app = group("toolchain", "Toolchains mambawin sets up itself.")

# The Windows toolchain's folder: --windows-root, as in every command that uses it; its old name
# --root still works, hidden. Text, not a Path: wine.root_option refuses an empty one.
WindowsRootOption = Annotated[
    str | None,
    typer.Option(
        "--windows-root",
        help="Where it lives: a new or empty folder, or one --setup made.",
        show_default="mambawin's cache",
    ),
]
OldRootOption = Annotated[
    str | None, typer.Option("--root", hidden=True, help="Old name of --windows-root.")
]

# --root of mambawin's CUDA for Linux (checked as the Windows one is: wine.root_option)
RootOption = Annotated[
    str | None,
    typer.Option(
        "--root",
        help="Where it lives: a new or empty folder, or one --setup made.",
        show_default="mambawin's cache",
    ),
]

CudaOption = Annotated[
    str | None,
    typer.Option("--cuda", help="With --setup: CUDA version of nvcc.", show_default=SETUP_CUDA),
]


@command(
    "windows",
    cache=True,
    group=toolchain_app,
    epilog=examples(
        "mambawin toolchain windows --setup",
        "mambawin toolchain windows --setup --windows-root D:\\windows-toolchain",
        "mambawin toolchain windows --env github >> $GITHUB_ENV",
    ),
)
def windows_command(
    setup: Annotated[
        bool, typer.Option("--setup", help="Fetch MSVC, CUDA and torch headers with pip.")
    ] = False,
    windows_root: WindowsRootOption = None,
    old_root: OldRootOption = None,
    cuda: CudaOption = None,
    torch: Annotated[
        str | None,
        typer.Option(
            "--torch", help="With --setup: torch whose headers to use.", show_default=SETUP_TORCH
        ),
    ] = None,
    accept_license: Annotated[
        bool,
        typer.Option(
            "--accept-license",
            help="With --setup: accept the licence terms of what it downloads (Microsoft's "
            "Build Tools and Windows SDK terms, NVIDIA's CUDA EULA; the refusal links them). "
            "Recorded in the toolchain folder: asked once.",
        ),
    ] = False,
    env: Annotated[
        str | None,
        typer.Option(
            "--env",
            help="Print the variables a native Windows build takes from the toolchain, as "
            "KEY=VALUE lines for $GITHUB_ENV (format: github).",
        ),
    ] = None,
    msvc: Annotated[
        bool,
        typer.Option(
            "--msvc/--no-msvc",
            help="With --env: include MSVC's variables; --no-msvc leaves compiling C++ to the "
            "machine's Visual Studio.",
        ),
    ] = True,
    as_json: Annotated[bool, typer.Option("--json", help="Print the result as JSON.")] = False,
) -> None:
    """Say whether cl.exe and the Windows nvcc can run here; --setup fetches them.

    They run natively on Windows, under wine elsewhere. `mambawin check`, `build --platform
    win_amd64` and verify's load step of a Windows wheel use them; `doctor --windows-root`
    checks them."""
    from mambawin.errors import ToolchainError, UsageError
    from mambawin.toolchain import wine, wine_server, wine_setup
    from mambawin.toolchain.host import Host

    if accept_license and not setup:
        raise UsageError("--accept-license accepts what --setup downloads: add --setup, or drop it")
    given = [flag for flag, value in (("--cuda", cuda), ("--torch", torch)) if value is not None]
    if given and not setup:  # they choose what --setup fetches; alone they would be ignored
        verb, them = ("choose", "them") if len(given) > 1 else ("chooses", "it")
        msg = f"{' and '.join(given)} {verb} what --setup fetches: add --setup, or drop {them}"
        raise UsageError(msg)
    _refuse_env_mix(env, msvc=msvc, setup=setup, as_json=as_json)
    if windows_root is not None and old_root is not None:
        raise UsageError("--root is the old name of --windows-root: give the folder once")
    flag = "--windows-root" if windows_root is not None else "--root"
    where = wine.root_option(windows_root if windows_root is not None else old_root, flag=flag)
    _readable(where, wine.check_toolchain_root)
    if env is not None:
        _print_env(where, env, msvc=msvc)
        return
    host = Host.this_machine()
    if setup:
        result = wine_setup.setup(
            where,
            cuda=SETUP_CUDA if cuda is None else cuda,
            torch=SETUP_TORCH if torch is None else torch,
            host=host,
            accept_license=accept_license,
            download=partial(
                wine_setup.pip_download,
                progress=_downloading("MSVC, the Windows CUDA and torch's headers"),
            ),
        )
        if result.license_recorded:
            _say_accepted(where)
        missing, launcher = list(result.missing), result.wine
    else:
        launcher = wine_server.find_wine() if host.needs_wine else None
        missing = wine_server.not_ready(wine.toolchain_at(where), launcher, host)
    for line in missing[1:]:
        console.print(f"✗ {line}", markup=False)
    document = {"root": str(where), "ready": not missing, "wine": launcher, "host": host.system}
    if missing and as_json:  # the error document, with what is missing
        message = f"the Windows toolchain in {where} is not ready: {missing[0]}"
        raise fail_json(message, ToolchainError.exit_code, **document, missing=missing)
    if missing:  # one line from the command decorator
        raise ToolchainError(f"the Windows toolchain in {where} is not ready: {missing[0]}")
    if as_json:
        print_json(document)
        return
    how = launcher if host.needs_wine else "natively, no Visual Studio or CUDA installer needed"
    console.print(f"✓ the Windows toolchain is ready in {where} ({how})", markup=False)


def _say_accepted(where: Path) -> None:
    """A note (stderr) that the terms were accepted for this folder, and where that is kept."""
    from mambawin.toolchain import licenses

    record = where / licenses.RECORD
    note = f"accepted {licenses.named()}; recorded in {record}"
    console.print(note, soft_wrap=True, markup=False)


def _downloading(what: str) -> Callable[[DownloadStatus], None]:
    """Where pip's download progress goes: a line on stderr every few seconds, after one that
    says what is fetched (only when something is: a toolchain already set up fetches nothing)."""
    from mambawin.ui.progress import show_download

    said: list[bool] = []

    def show(status: DownloadStatus) -> None:
        if not said:
            console.print(f"fetching {what} with pip ({status.count} wheels; pip caches them)")
            said.append(True)
        show_download(status)

    return show


def _refuse_env_mix(env: str | None, *, msvc: bool, setup: bool, as_json: bool) -> None:
    """--env is a mode of its own: its output is the variables and nothing else."""
    from mambawin.errors import UsageError
    from mambawin.toolchain.export import FORMATS

    if env is not None and env not in FORMATS:
        msg = f"--env {env!r}: the only format is {', '.join(FORMATS)} (lines for $GITHUB_ENV)"
        raise UsageError(msg)
    if env is None and not msvc:
        raise UsageError("--no-msvc chooses what --env prints: add --env github, or drop it")
    if env is not None and as_json:
        raise UsageError("--env prints KEY=VALUE lines, not JSON: drop --json")
    if env is not None and setup:
        msg = (
            "--env prints the variables of a toolchain already set up: run `mambawin toolchain "
            "windows --setup` first, then --env without --setup"
        )
        raise UsageError(msg)


def _readable(where: Path, check: Callable[[Path], bool]) -> None:
    """A root --setup would refuse (a file, a FIFO, someone else's folder) is refused the same
    way (exit 2) when only read, not reported as parts that --setup would never fetch there. A
    link to a folder is read through, as setup uses a link to a complete toolchain of its own."""
    check(where.resolve() if where.is_symlink() and where.is_dir() else where)


def _print_env(where: Path, form: str, *, msvc: bool) -> None:
    """The toolchain's variables as form's lines; exit 5 naming the first missing part."""
    import os

    from mambawin.errors import ToolchainError
    from mambawin.toolchain import export, wine

    # Absolute: the later steps of the job need not run in the folder this one ran in.
    toolchain = wine.toolchain_at(where.absolute(), torch=False)
    missing = wine.missing_parts(toolchain)
    if missing:
        raise ToolchainError(f"the Windows toolchain in {where} is not ready: {missing[0]}")
    lines = export.env_lines(export.job_environ(toolchain, dict(os.environ), msvc=msvc), form)
    typer.echo(lines, nl=False)


@command(
    "linux",
    cache=True,
    group=toolchain_app,
    epilog=examples("mambawin toolchain linux --setup", "mambawin toolchain linux --json"),
)
def linux_command(
    setup: Annotated[
        bool, typer.Option("--setup", help="Fetch nvcc and the CUDA headers and runtime with pip.")
    ] = False,
    root: RootOption = None,
    cuda: CudaOption = None,
    accept_license: Annotated[
        bool,
        typer.Option(
            "--accept-license",
            help="With --setup: accept NVIDIA's CUDA Toolkit EULA (the refusal links it). "
            "Recorded in the folder: asked once.",
        ),
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the result as JSON.")] = False,
) -> None:
    """Say whether mambawin's own CUDA for Linux builds is set up; --setup fetches it.

    A Linux build uses it when the machine has no CUDA toolkit of its own."""
    from mambawin.errors import ToolchainError, UsageError
    from mambawin.toolchain import linux_cuda, wine

    if accept_license and not setup:
        raise UsageError("--accept-license accepts what --setup downloads: add --setup, or drop it")
    if cuda is not None and not setup:
        raise UsageError("--cuda chooses what --setup fetches: add --setup, or drop it")
    where = linux_cuda.default_root() if root is None else wine.root_option(root, "./linux-cuda")
    _readable(where, linux_cuda.check_cuda_root)
    if setup:
        download = partial(linux_cuda.pip_download, progress=_downloading("CUDA for Linux"))
        found = linux_cuda.setup(
            where,
            cuda=SETUP_CUDA if cuda is None else cuda,
            download=download,
            accept_license=accept_license,
        )
    else:
        found = linux_cuda.LinuxCuda(where)
    missing = found.missing()
    document = {"root": str(where), "ready": not missing, "cuda_home": str(found.home)}
    if missing and as_json:
        message = f"mambawin's CUDA in {where} is not ready: {missing[0]}"
        raise fail_json(message, ToolchainError.exit_code, **document, missing=missing)
    if missing:
        raise ToolchainError(f"mambawin's CUDA in {where} is not ready: {missing[0]}")
    if as_json:
        print_json(document)
        return
    console.print(
        f"✓ CUDA {found.cuda} is ready: CUDA_HOME={found.home}", soft_wrap=True, markup=False
    )
