"""The faces of a build request, each derived from the one declaration of its options
(builder/request.py): the command line back into a request, the request as a command line
(`to_argv`) and as a workflow's bash (`shell_argv`), and docs/build.md's synopsis and table."""

from __future__ import annotations

import shlex
from collections.abc import Iterable, Mapping
from typing import Any

from mambawin.builder.request import (
    BACKEND_NAMES,
    BUILD_OPTIONS,
    FIELD_OPTIONS,
    SPEC_OPTIONS,
    WINDOWS_CHECK,
    BuildOption,
    BuildRequest,
    backend_for,
    command_of,
    command_options,
)
from mambawin.fetch.sdist import source_choice


def from_params(command: str, params: Mapping[str, Any]) -> BuildRequest:
    """The request a command's parsed parameters ask for (by field name; None: not given).

    A source_from not given is read from the environment ($MAMBAWIN_SOURCE) here, as build
    always has; every other field not given keeps its default."""
    values: dict[str, Any] = {}
    for declared in command_options(command):
        if declared.name and declared.name in params:
            values[declared.name] = declared.parse(params[declared.name])
    values["source_from"] = source_choice(params.get("source_from"))
    backend = WINDOWS_CHECK if command == "check" else backend_for(values.get("platform"))
    return BuildRequest(**values, backend=backend)


def to_argv(request: BuildRequest, *, extra: Iterable[BuildOption] = ()) -> list[str]:
    """The one command line that asks for this request: `build ...` or `check ...`, each field
    set away from its default by its flag (extra: run flags such as --plan, given as set)."""
    argv = [command_of(request.backend)]
    for declared in FIELD_OPTIONS:
        argv += declared.argv(getattr(request, declared.name))
    return argv + [o.flag for o in extra]


def option_table() -> str:
    """docs/build.md's table of options × backends, from each option's one declaration."""
    rows = [
        "| option | native (`build`) | cross-windows (`build --platform win_amd64`) | "
        "windows-check (`check`) | what it does |",
        "|---|---|---|---|---|",
    ]
    for declared in BUILD_OPTIONS:
        cells = ["✓" if b in declared.backends else "refused" for b in BACKEND_NAMES]
        text = declared.help.replace("|", "\\|")
        rows.append(f"| `{declared.flag}` | {' | '.join(cells)} | {text} |")
    return "\n".join(rows) + "\n"


def synopsis(command: str) -> str:
    """A command's usage line, every option it takes in declaration order, wrapped."""
    words = [f"[{_usage(o)}]" for o in command_options(command)]
    lines, line = [], f"mambawin {command}"
    for word in words:
        if len(line) + 1 + len(word) > 100:
            lines.append(line)
            line = " " * len(f"mambawin {command}")
        line += " " + word
    return "\n".join([*lines, line]) + "\n"


def _usage(declared: BuildOption) -> str:
    if declared.cli == "flag":
        return declared.flag
    if declared.cli == "switch":
        return f"{declared.flag}|--no-{declared.flag.removeprefix('--')}"
    value = declared.metavar or {
        "int": "N",
        "path": "DIR",
        "list": "NAME,...",
        "archs": "LIST",
    }.get(declared.cli, "TEXT")
    return f"{declared.flag} {value}"


def spec_env(backend: str, values_from: str = "matrix") -> dict[str, str]:
    """A workflow step's environment: each [options] key the backend applies, as a variable
    from the job's matrix (scripts read values from the environment, never from expressions)."""
    return {
        str(o.spec_key).upper(): f"${{{{ {values_from}.{o.spec_key} }}}}"
        for o in SPEC_OPTIONS
        if backend in o.backends
    }


def spec_words(backend: str) -> dict[str, str]:
    """Each [options] field the backend applies, as the shell word spec_env sets."""
    return {o.name: f'"${str(o.spec_key).upper()}"' for o in SPEC_OPTIONS if backend in o.backends}


def shell_argv(words: Mapping[str, str]) -> str:
    """to_argv for a workflow's bash: the lines that add each field's flag to the array `extra`,
    in declaration order. words maps a field to a shell word: a variable (`"$REF"`, read at run
    time: its flag added when it is set and not the field's default) or a literal the generator
    knows (always added; `true` for a flag)."""
    lines = []
    for declared in FIELD_OPTIONS:
        word = words.get(declared.name)
        if word is None:
            continue
        flagged = declared.cli in ("flag", "switch")
        if not word.startswith('"$'):  # known now: written as it is
            add = declared.flag if flagged else f"{declared.flag} {shlex.quote(word)}"
            lines.append(f"extra+=({add})")
            continue
        if flagged:
            test, add = f'[ {word} = "true" ]', declared.flag
        else:
            test, add = f"[ -n {word} ]", f"{declared.flag} {word}"
            default = declared.default
            shown = getattr(default, "name", default)
            if isinstance(shown, str) and shown:
                test += f' && [ {word} != "{shown}" ]'
        lines.append(f"if {test}; then extra+=({add}); fi")
    return "extra=()\n" + "\n".join(lines) + "\n"
