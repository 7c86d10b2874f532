"""Every command as data: its name, the module that defines it, its panel and its one-line help.

`mambawin --help` lists the commands from here without importing a command module (each pulls in
the builder, the verifier or the toolchain code: 84 modules and a visible pause before the help
appeared); a command's module is imported only when that command runs or shows its own help. The
command's short help is this summary (`cli.app.command` reads it), so the listing and the command
never disagree. The order is the order a person meets them: check the machine, build, verify.
"""

from __future__ import annotations

from dataclasses import dataclass

BUILD_PANEL = "Build and verify"
TEAM_PANEL = "Team wheels"
PARTS_PANEL = "Parts and upkeep"


@dataclass(frozen=True)
class Entry:
    """One command (or group of commands) of the root."""

    name: str
    module: str  # under mambawin.cli
    panel: str
    summary: str  # the line `mambawin --help` shows


COMMANDS: tuple[Entry, ...] = (
    Entry(
        "doctor", "doctor", BUILD_PANEL, "Check this machine for a build; say how to fix each gap."
    ),
    Entry(
        "build", "build", BUILD_PANEL, "Build mamba-ssm and causal-conv1d wheels for this machine."
    ),
    Entry("verify", "verify", BUILD_PANEL, "Check wheels: metadata, install, kernels on the GPU."),
    Entry("bench", "verify", BUILD_PANEL, "Time the compiled selective scan on this GPU."),
    Entry(
        "rebuild",
        "rebuild",
        BUILD_PANEL,
        "Rebuild a published wheel from its provenance; compare the bytes.",
    ),
    Entry(
        "toolchain",
        "toolchain",
        BUILD_PANEL,
        "Set up the Windows compilers or mambawin's own CUDA.",
    ),
    Entry("check", "check", BUILD_PANEL, "Compile a ref with the Windows compilers under wine."),
    Entry("init", "team", TEAM_PANEL, "Write an example team spec to edit."),
    Entry("matrix", "team", TEAM_PANEL, "Show the wheels a team spec makes and which exist."),
    Entry("ci", "ci", TEAM_PANEL, "Write a CI workflow that builds the team spec."),
    Entry("index", "team", TEAM_PANEL, "Write a pip index (PEP 503) of a folder of wheels."),
    Entry("fetch", "build", PARTS_PANEL, "Check out upstream mamba-ssm or causal-conv1d."),
    Entry("patch", "patch", PARTS_PANEL, "Apply the Windows patch set to a source tree."),
    Entry(
        "patches", "patch", PARTS_PANEL, "List the patches: what each fixes and for which versions."
    ),
    Entry("metadata", "wheel", PARTS_PANEL, "Copy a wheel with requirements fit for its platform."),
    Entry("cache", "cache", PARTS_PANEL, "Show what mambawin's cache holds; prune kept builds."),
)

BY_NAME = {entry.name: entry for entry in COMMANDS}


def summary(name: str) -> str | None:
    """The short help of a root command, None for a sub-command (`ci github`)."""
    entry = BY_NAME.get(name)
    return entry.summary if entry else None
