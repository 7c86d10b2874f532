"""Find the first real compiler error in a build log, so a failed build ends with one useful line.

A torch/ninja build of mamba prints thousands of lines; the line a user needs is the first
diagnostic of the compiler (MSVC, nvcc's front end, gcc or the linker), not the last one
(`ninja: build stopped: subcommand failed.` or setuptools' `error: command ... failed`).
Logs pasted from a Windows console are often hard-wrapped at a fixed width; pip indents its
output; pycuda-style reports print it as a Python bytes repr. All three are handled here.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace

# MSVC and nvcc's EDG front end: `file(line): [fatal] error C2975: msg` / `file(line): error: msg`.
# The file part may hold spaces and "(x86)", so it is matched lazily up to "(digits[,col]): ".
_PAREN = re.compile(
    r"^(?P<file>\S.*?)\((?P<line>\d+)(?:,(?P<col>\d+))?\)\s?:\s+(?P<fatal>fatal\s+)?error\b"
    r"\s*(?P<code>[A-Z]+\d+)?\s*:?\s*(?P<msg>.*)$"
)
# gcc / clang / nvcc-on-Linux: `file:line[:col]: [fatal] error: msg` (a Windows drive is allowed).
_COLON = re.compile(
    r"^(?P<file>(?:[A-Za-z]:)?[^:\s][^:]*?):(?P<line>\d+):(?:(?P<col>\d+):)?\s+"
    r"(?P<fatal>fatal\s+)?error:\s*(?P<msg>.*)$"
)
# Tool-level errors without a source line: `c1xx: fatal error C1081: ...`,
# `LINK : fatal error LNK1181: ...`, `x.obj : error LNK2001: ...`, `nvcc fatal   : ...`.
_TOOL = re.compile(
    r"^(?P<file>[\w.\-\\/:]+?)\s*:\s+(?P<fatal>fatal\s+)?error\s+(?P<code>[A-Z]+\d+)\s*:\s*"
    r"(?P<msg>.*)$"
)
_NVCC_FATAL = re.compile(r"^(?P<file>nvcc)\s+(?P<fatal>fatal)\s*:\s*(?P<msg>.*)$")
# The MSVC STL's version gate, sometimes quoted without its file (ZLUDA#108): `error STL1002: ...`.
_STL = re.compile(r"(?:^|[\s`])error\s+(?P<code>STL\d{4})\s*:\s*(?P<msg>[^`]*)")
# nvcc's summary line names the translation unit even when the diagnostic scrolled away.
_DETECTED = re.compile(r'^(?P<msg>\d+ errors? detected in the compilation of "(?P<file>[^"]+)")')
_PY_EXC = re.compile(r"^(?P<msg>(?:[\w.]+\.)?\w*(?:Error|Exception): .+)$")
_DISTUTILS = re.compile(r"^(?P<msg>error: command .+ failed with exit (?:code|status) -?\d+)")
_NINJA = re.compile(r"^(?P<msg>ninja: build stopped: .*)$")

# Most specific first: a diagnostic with a source line beats any summary line.
_COMPILER = (_PAREN, _COLON, _TOOL, _NVCC_FATAL)
_FALLBACKS = (_DETECTED, _PY_EXC, _DISTUTILS, _NINJA)


@dataclass(frozen=True)
class Diagnostic:
    """One error found in a log: where (file, line when known), what, and the log line number."""

    message: str
    file: str | None = None
    line: int | None = None
    code: str | None = None
    log_line: int = 0  # 1-based line number in the log as given
    fatal: bool = False
    summary: bool = False  # a summary line (ninja stopped, an exception), not the diagnostic
    context: tuple[str, ...] = ()  # the lines right after it (template notes, echoed source)

    def location(self) -> str:
        """`file(line)` as MSVC prints it, or the file alone, or ''."""
        if self.file and self.line is not None:
            return f"{self.file}({self.line})"
        return self.file or ""

    def one_line(self) -> str:
        """The error as one line: `file(line): fatal error C1189: message`."""
        if self.summary:
            return self.message
        code = ("fatal error" if self.fatal else "error") + (f" {self.code}" if self.code else "")
        where = self.location()
        return f"{where}: {code}: {self.message}" if where else f"{code}: {self.message}"


def first_error(lines: Iterable[str]) -> Diagnostic | None:
    """The first real compiler error in a log, else the best summary line, else None."""
    numbered = list(enumerate((line.rstrip("\r\n") for line in lines), start=1))
    # Unwrapped first, so a message cut by a console's width comes back whole; raw second, in
    # case the width guess glued an error line to a command line.
    for candidate in (_normalise(_unwrap(numbered)), _normalise(numbered)):
        found = _first_in_log_order(candidate, _COMPILER)
        if found is not None:
            return found
    normalised = _normalise(numbered)
    return _stl_error(normalised) or _first_by_priority(normalised, _FALLBACKS)


def _first_in_log_order(
    lines: Sequence[tuple[int, str]], patterns: Sequence[re.Pattern[str]]
) -> Diagnostic | None:
    for index, (number, text) in enumerate(lines):
        if _is_not_a_diagnostic(text):
            continue
        for pattern in patterns:
            match = pattern.match(text)
            if match:
                return _diagnostic(match, number, _context(lines, index))
    return None


def _first_by_priority(
    lines: Sequence[tuple[int, str]], patterns: Sequence[re.Pattern[str]]
) -> Diagnostic | None:
    for pattern in patterns:
        found = _first_in_log_order(lines, (pattern,))
        if found is not None:
            return replace(found, summary=True)
    return None


def _context(lines: Sequence[tuple[int, str]], index: int) -> tuple[str, ...]:
    return tuple(text for _, text in lines[index + 1 : index + 4] if text)


def _diagnostic(match: re.Match[str], number: int, context: tuple[str, ...]) -> Diagnostic:
    groups = match.groupdict()
    line = groups.get("line")
    return Diagnostic(
        message=groups["msg"].strip() or "(no message)",
        file=(groups.get("file") or "").strip() or None,
        line=int(line) if line else None,
        code=groups.get("code"),
        log_line=number,
        context=context,
        fatal=bool(groups.get("fatal")),
    )


def _stl_error(lines: Sequence[tuple[int, str]]) -> Diagnostic | None:
    for number, text in lines:
        match = _STL.search(text)
        if match:
            return Diagnostic(match["msg"].strip(), code=match["code"], log_line=number, fatal=True)
    return None


def _is_not_a_diagnostic(text: str) -> bool:
    # A ninja progress line or a compiler command line may contain "error" in flags or paths
    # (-Werror, ...\error\...); pip's `error: subprocess-exited-with-error` is its own frame.
    return text.startswith(("[", "error: subprocess-exited-with-error")) or " -c " in text


def _normalise(lines: Sequence[tuple[int, str]]) -> list[tuple[int, str]]:
    """Strip pip's indentation and split Python bytes reprs (`b"...\\r\\n..."`) into lines."""
    out: list[tuple[int, str]] = []
    for number, text in lines:
        if "\\r\\n" in text or text.lstrip().startswith(('b"', "b'")):
            for piece in _BYTES_NEWLINE.split(_unquote_bytes(text.strip())):
                out.append((number, piece.replace("\\\\", "\\").strip()))
        else:
            out.append((number, text.strip()))
    return out


# A literal \r\n or \n inside a bytes repr; `\\n` (an escaped backslash before n) is a path.
_BYTES_NEWLINE = re.compile(r"\\r\\n|(?<!\\)\\n")


def _unquote_bytes(text: str) -> str:
    if text[:2] in ('b"', "b'"):
        text = text[2:]
    return text.rstrip("\"']")


def wrap_width(lines: Sequence[str]) -> int | None:
    """The fixed width a console hard-wrapped this log at, if it looks wrapped."""
    lengths = Counter(len(line) for line in lines if len(line) >= 80)
    if not lengths:
        return None
    width, count = max(lengths.items())
    # A console wraps every long line at the same column, so the longest length repeats.
    return width if count >= 2 else None


def _unwrap(lines: Sequence[tuple[int, str]]) -> list[tuple[int, str]]:
    """Join lines that a console split at its width (logs copied from a Windows console)."""
    width = wrap_width([text for _, text in lines])
    if width is None:
        return list(lines)
    out: list[tuple[int, str]] = []
    carry: tuple[int, str] | None = None
    for number, text in lines:
        if carry is not None:
            number, text = carry[0], carry[1] + text
        carry = (number, text) if text and len(text) % width == 0 else None
        if carry is None:
            out.append((number, text))
    if carry is not None:
        out.append(carry)
    return out
