"""`verify --report FILE`: what a user sends back after a verify, as JSON and as Markdown.

What ran (the command, with the wheels' file names, not their folders), where (OS, Python, torch,
CUDA, NVIDIA driver, GPU, glibc), each step's result, and the first failing step's error in full.
Both files are written, side by side: FILE as its suffix says (.md or .json) and the other format
beside it, so a user pastes the Markdown into an issue and a tool reads the JSON.

The paths are checked before any work (a folder, a FIFO, a symlink, a missing or read-only
folder, a file mambawin did not write are refused), and both files are written together or not
at all. A file counts as a report mambawin wrote (and may be overwritten) only when its first
line is exactly the one mambawin writes and the sha256 it carries of its own body matches: a
file that merely mentions the report's kind is someone else's.
"""

from __future__ import annotations

import json
import os
import platform
import re
import stat
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mambawin import __version__
from mambawin.errors import UsageError, os_error
from mambawin.index.inputs import REPORT_KIND
from mambawin.store import atomic
from mambawin.userfile import kind_of
from mambawin.verify.options import VerifyOptions
from mambawin.verify.profile import profile_lines, seconds_text
from mambawin.verify.report import StepResult, VerifyReport
from mambawin.verify.seal import (
    SCHEMA,
    first_line,
    sealed_json,
    sealed_markdown,
    written_by_mambawin,
)

KIND = REPORT_KIND  # the JSON's first key and the Markdown's first line name it
SUFFIXES = (".md", ".json")
_MOST = 4 << 20  # a report is tens of KB; a bigger file at its name is not one mambawin wrote


@dataclass(frozen=True)
class ReportPaths:
    """The two files one --report writes."""

    markdown: Path
    json: Path


def report_paths(path: Path) -> ReportPaths:
    """The Markdown and JSON paths of `--report path`, or UsageError (exit 2) naming what is
    wrong: checked before verify runs, and again just before the write."""
    suffix = path.suffix.lower()
    if suffix not in SUFFIXES:
        msg = (
            f"--report {path}: the name must end in .md or .json (both are written, side by "
            "side): pass e.g. --report report.md"
        )
        raise UsageError(msg)
    folder = path.parent
    try:
        parent = os.stat(folder)
    except FileNotFoundError:
        raise UsageError(
            f"--report {path}: the folder {folder} does not exist: create it or choose another"
        ) from None
    except OSError as exc:
        raise os_error(exc, "use the folder of the report") from None
    if not stat.S_ISDIR(parent.st_mode):
        raise UsageError(f"--report {path}: {folder} is not a folder: choose another path")
    atomic.probe_writable(folder, "--report's folder")  # before minutes of GPU steps
    other = path.with_suffix(".json" if suffix == ".md" else ".md")
    paths = ReportPaths(path, other) if suffix == ".md" else ReportPaths(other, path)
    for each in (paths.markdown, paths.json):
        _check_target(each, named=path)
    return paths


def _check_target(path: Path, *, named: Path) -> None:
    """Nothing there, or a report mambawin wrote (overwritten); anything else is refused."""
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return
    except OSError as exc:
        raise os_error(exc, "use the report") from None
    also = "" if path == named else f" (--report {named} writes it too)"
    if stat.S_ISLNK(info.st_mode):
        msg = f"{path} is a symlink{also}: pass a plain file path, not a link"
        raise UsageError(msg)
    kind = kind_of(info.st_mode)
    if kind is not None:
        raise UsageError(f"{path} is {kind}{also}: pass a file path for the report")
    if info.st_size > _MOST:
        _not_ours(path, also)
    try:
        with open(path, "rb") as stream:
            data = stream.read(_MOST + 1)
    except OSError as exc:
        raise os_error(exc, "read the existing report") from None
    if not written_by_mambawin(data, markdown=path.suffix.lower() == ".md"):
        _not_ours(path, also)


def _not_ours(path: Path, also: str) -> None:
    msg = (
        f"{path} already exists and is not a report mambawin wrote{also}: "
        "choose another name, or move that file away"
    )
    raise UsageError(msg)


# ---- what the report says --------------------------------------------------------------------


def where(report: VerifyReport, driver: str | None) -> dict[str, Any]:
    """The machine the steps ran on: this OS and Python, and what verify's probe saw."""
    target = report.target
    cc = target.capability
    return {
        "os": platform.platform(),
        "python": f"{platform.python_version()} ({platform.python_implementation()})",
        "torch": target.torch_version,
        "cuda": target.torch_cuda,
        "gpu": target.gpu_name,
        "capability": f"sm_{cc[0]}{cc[1]}" if cc else None,
        "driver": driver,
        "glibc": target.glibc,
        "probe_error": target.error,
    }


def command(options: VerifyOptions, report_name: str) -> str:
    """The command as the user ran it, with wheels by file name (their folder is nobody's
    business): `mambawin verify mamba_ssm-…whl --skip smoke --report report.md`."""
    parts = ["mambawin", "verify"]
    if options.wheel is not None:
        parts.append(Path(options.wheel).name)
    flags = (
        ("--installed", options.installed),
        ("--bench", options.bench),
        ("--upstream-tests", options.upstream_tests),
        ("--quick", bool(options.smoke_args)),
        ("--serial", options.serial),
    )
    parts += [flag for flag, on in flags if on]
    if options.test_keyword:
        parts += ["-k", repr(options.test_keyword)]
    if options.skip:
        parts += ["--skip", ",".join(sorted(options.skip))]
    if options.seed is not None:
        parts += ["--seed", str(options.seed)]
    return " ".join([*parts, "--report", report_name])


def document(report: VerifyReport, ran: str, machine: Mapping[str, Any]) -> dict[str, Any]:
    """The JSON report: kind and schema first (how an existing file is recognised as one)."""
    verify = report.to_json()
    failed = next((s for s in report.steps if s.status.value == "fail"), None)
    first_error = None
    if failed is not None:
        first_error = {"step": failed.name, "summary": failed.summary, "text": _error_text(failed)}
    return _private(
        {
            "kind": KIND,
            "schema": SCHEMA,
            "mambawin": __version__,
            "ran": ran,
            "where": dict(machine),
            "wheels": verify["sha256"],
            "passed": verify["passed"],
            "gpu_verified": verify["gpu_verified"],
            "summary": verify["summary"],
            "steps": [
                {k: s[k] for k in ("name", "status", "summary", "seconds")} for s in verify["steps"]
            ],
            "first_error": first_error,
            "profile": verify["profile"],
        },
        _home(),
    )


def _home() -> str | None:
    try:
        return str(Path.home())
    except (RuntimeError, KeyError):  # no home folder known: nothing to shorten
        return None


def _private(value: dict[str, Any], home: str | None) -> dict[str, Any]:
    """The user's home folder as `~` in every text: a report is pasted in public, and on Windows
    the home folder holds the user's name."""
    return {k: _private_value(v, home) for k, v in value.items()}


def _private_value(value: object, home: str | None) -> object:
    if isinstance(value, str):
        return _home_pattern(home).sub("~", value) if home and len(home) > 1 else value
    if isinstance(value, dict):
        return {k: _private_value(v, home) for k, v in value.items()}
    if isinstance(value, list):
        return [_private_value(v, home) for v in value]
    return value


def _home_pattern(home: str) -> re.Pattern[str]:
    """home as a whole path: not inside a longer name (HOME=/home/al leaves /home/alice, and
    /x/home/al, alone), followed by a separator, the text's end or what ends a path in prose."""
    home = home.rstrip("/\\") or home
    return re.compile(rf"(?<![\w.~/\\-]){re.escape(home)}(?=[/\\\s'\"`:;,)\]]|$)")


def _error_text(step: StepResult) -> str:
    """The failing step's whole story: its error and the output tail when the runner kept one,
    else its details as JSON (a smoke step's worst cases, pip's refusal...)."""
    details = dict(step.details or {})
    if details.get("error") or details.get("tail"):
        return "\n".join(str(details[k]) for k in ("error", "tail") if details.get(k))
    if details:
        return json.dumps(details, indent=2, default=str)
    return str(step.summary)


def markdown(doc: Mapping[str, Any]) -> str:
    """The report as Markdown an issue renders: the verdict, the machine, the steps, the error."""
    machine = doc["where"]
    verdict = "passed" if doc["passed"] else "FAILED"
    rows = [
        ("OS", machine["os"]),
        ("Python", machine["python"]),
        ("torch", machine["torch"]),
        ("CUDA (torch's)", machine["cuda"]),
        ("GPU", _gpu(machine)),
        ("NVIDIA driver", machine["driver"]),
        ("glibc", machine["glibc"] or "-"),
    ]
    if machine.get("probe_error"):
        rows.append(("torch probe", machine["probe_error"]))
    lines = [
        first_line(),
        f"### mambawin verify: {verdict}",
        "",
        f"{_cell(doc['summary'])}",
        "",
        f"Ran {_code(doc['ran'])} with mambawin {doc['mambawin']}.",
        "",
        "| where | |",
        "|---|---|",
        *(
            f"| {name} | {_cell(value if value is not None else 'unknown')} |"
            for name, value in rows
        ),
        "",
        "| step | result | seconds | summary |",
        "|---|---|---|---|",
        *(
            f"| {_cell(s['name'])} | {s['status']} | {seconds_text(s['seconds'])}"
            f" | {_cell(s['summary'])} |"
            for s in doc["steps"]
        ),
    ]
    lines += profile_lines(doc.get("profile") or {}, _cell)
    error = doc["first_error"]
    if error is not None:
        text = _shortened(error["text"])
        fence = _fence(text)
        lines += [
            "",
            f"First error, at {_code(error['step'])}:",
            "",
            f"{fence}text",
            text,
            fence,
        ]
    if doc["wheels"]:
        lines += ["", "Wheels (sha256):", ""]
        lines += [
            f"- {_code(name)} {_code(digest)}" for name, digest in sorted(doc["wheels"].items())
        ]
    return "\n".join(lines) + "\n"


# GitHub refuses an issue body over 65,536 characters, and a conv step's details ran to 70 KB on
# the H100: the Markdown keeps the error's head, the JSON beside it the whole text.
ERROR_LINES, ERROR_CHARS = 60, 6000


def _shortened(text: str) -> str:
    """text's first ERROR_LINES lines (at most ERROR_CHARS characters), saying what was left."""
    lines = text.splitlines()
    head = "\n".join(lines[:ERROR_LINES])[:ERROR_CHARS]
    if head == text:
        return text
    kept = head.count("\n") + 1
    return f"{head}\n... ({len(lines) - kept} more lines: the whole text is in the JSON report)"


def _gpu(machine: Mapping[str, Any]) -> str | None:
    if machine["gpu"] is None:
        return None
    return (
        f"{machine['gpu']} ({machine['capability']})" if machine["capability"] else machine["gpu"]
    )


def _cell(value: object) -> str:
    """One table cell: a '|' would end the cell and a line break the row."""
    return " ".join(str(value).split()).replace("|", "\\|")


def _code(value: object) -> str:
    """value as a Markdown code span that nothing in it can close (a `-k` holding backticks
    would end it and turn the rest into live Markdown, a link say): delimited by one backtick
    more than its longest run, padded when it starts or ends with one."""
    text = " ".join(str(value).split())
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    ticks = "`" * (longest + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{ticks}{pad}{text}{pad}{ticks}"


def _fence(text: str) -> str:
    """A code fence longer than any backtick run in the text, so the text cannot close it."""
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    return "`" * max(3, longest + 1)


def write(paths: ReportPaths, doc: Mapping[str, Any]) -> None:
    """Both files or neither; an OS error is FileSystemError (exit 10), nothing half-written."""
    report_paths(paths.markdown)  # again: a link or a FIFO put there while verify ran
    changes = {
        paths.markdown.name: sealed_markdown(markdown(doc)),
        paths.json.name: sealed_json(doc),
    }
    try:
        atomic.write_files(paths.markdown.parent, changes)
    except OSError as exc:
        raise os_error(exc, "write the report (neither file was written)") from None
