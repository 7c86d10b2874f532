"""What an index run publishes, read and checked before the first byte is written: each wheel of
the wheelhouse (its zip checked member by member, its sha256, METADATA and provenance) and the
verify record beside it.

A wheel that is broken stops the run (exit 7), an unreadable input is the OS refusing (exit 10),
and a verify record that is not a plain, small JSON document of the shape `mambawin verify
--json` writes, naming this wheel's sha256, is ignored with the reason: the page says "not
verified". A record is never followed through a symlink and never opened in a way that blocks,
so a FIFO or a link to another user's private file can neither hang the run nor be published.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import InvalidWheelFilename, canonicalize_name, parse_wheel_filename

from mambawin.errors import UsageError, WheelError, os_error
from mambawin.secret_urls import refuse_secrets, secret_in
from mambawin.userfile import kind_of, parse_json
from mambawin.wheel.info import open_wheel, read_message, read_text_member, sha256_file
from mambawin.wheel.naming import check_tag_characters
from mambawin.wheel.provenance import Provenance, provenance_in

VERIFY_SUFFIX = ".verify.json"  # `mambawin verify WHEEL --json > WHEEL.verify.json`


# The first key of the JSON `mambawin verify --report FILE` writes (verify/send.py takes it from
# here: the index reads such a report as a verify record too).
REPORT_KIND = "mambawin-verify-report"


# A verify record with upstream tests and bench rows is a few dozen kB.
RECORD_LIMIT = 1 << 20


_SHA256 = re.compile(r"[0-9a-f]{64}")


@dataclass(frozen=True)
class VerifyRecord:
    """A `<wheel>.verify.json` as read: its bytes and what the page shows, or why it is ignored."""

    data: bytes = b""
    shown: Mapping[str, Any] | None = None  # {"passed": bool, "summary": str}
    ignored: str | None = None


@dataclass(frozen=True)
class Source:
    """One wheel of the wheelhouse, read and checked; what publishing it needs."""

    path: Path
    sha256: str
    size: int
    metadata: bytes  # the wheel's METADATA (published beside it, PEP 658)
    provenance: Provenance | None
    record: VerifyRecord | None  # None: no record beside it
    # The wheelhouse's wheels are what the run's attestation names; mambawin's own wheel is not.
    attested: bool = True


def read_sources(wheelhouse: Path, *, allow_empty: bool = False) -> list[Source]:
    """Every wheel of the wheelhouse with its verify record; UsageError when there is none
    (unless allow_empty: the run publishes mambawin's own wheel alone)."""
    paths = wheelhouse_files(wheelhouse)
    if not paths and not allow_empty:
        msg = (
            f"{wheelhouse} holds no .whl files: build wheels into it first "
            "(`mambawin build --out WHEELHOUSE`), or pass the folder that has them"
        )
        raise UsageError(msg)
    return [read_source(path) for path in paths]


def wheelhouse_files(folder: Path) -> list[Path]:
    """Every `*.whl` entry of the folder, whatever it is (each is checked when read)."""
    if not folder.is_dir():
        msg = f"{folder} is not a folder of wheels: pass the wheelhouse that holds your .whl files"
        raise UsageError(msg)
    try:
        names = sorted(entry.name for entry in os.scandir(folder))
    except OSError as exc:
        raise os_error(exc, "list the wheelhouse") from None
    return [folder / name for name in names if name.endswith(".whl")]


def read_source(path: Path) -> Source:
    """One wheel, checked whole (a symlinked wheel is read through its link: its bytes are
    copied, never the link)."""
    check_tag_characters(path.name)
    _check_is_file(path)
    with open_wheel(path) as (archive, info):
        metadata = read_text_member(path, archive, info.metadata_path)
        provenance = provenance_in(archive, info)
    _check_no_secret(path, provenance, metadata)
    try:
        digest, size = sha256_file(path), path.stat().st_size
    except OSError as exc:
        raise os_error(exc, "read the wheel") from None
    record = read_record(path.with_name(path.name + VERIFY_SUFFIX), digest)
    return Source(path, digest, size, metadata, provenance, record)


# How a release (or a team) gets mambawin's own wheel; the index run publishes it as given.
OWN_WHEEL_HOW = "`python -m pip wheel --no-deps -w dist <mambawin source>` writes one"


def read_own_wheel(path: Path) -> Source:
    """mambawin's own wheel (`index --with-mambawin`): a pure-Python mambawin wheel, nothing
    else, published beside the team's wheels in simple/mambawin/ (never under the run's
    attestation, which names the wheelhouse's wheels)."""
    if not os.path.lexists(path):
        raise UsageError(
            f"--with-mambawin {path} does not exist: give mambawin's wheel ({OWN_WHEEL_HOW})"
        )
    try:
        name, _, _, tags = parse_wheel_filename(path.name)
    except InvalidWheelFilename as exc:
        msg = f"--with-mambawin {path} is not a wheel file name ({exc}): {OWN_WHEEL_HOW}"
        raise UsageError(msg) from None
    if canonicalize_name(name) != "mambawin" or {str(t) for t in tags} != {"py3-none-any"}:
        msg = (
            f"--with-mambawin {path} is not mambawin's pure-Python wheel "
            f"(mambawin-VERSION-py3-none-any.whl): {OWN_WHEEL_HOW}"
        )
        raise UsageError(msg)
    return replace(read_source(path), record=None, attested=False)


def _check_no_secret(path: Path, provenance: Provenance | None, metadata: bytes) -> None:
    """The index publishes the wheel's METADATA and shows its provenance's repository: a URL
    in either that holds a credential (a direct-reference Requires-Dist `pkg @ https://user:
    TOKEN@…`, a wheel an older mambawin built from such a repository) is never published."""
    repo = (provenance or Provenance()).stored.get("upstream_repo")
    urls = [("its provenance's upstream_repo", repo)] if isinstance(repo, str) else []
    for text in read_message(metadata).get_all("Requires-Dist") or ():
        try:
            url = Requirement(str(text)).url
        except InvalidRequirement:
            url = None  # the verify step names a requirement that does not parse
        if url:
            urls.append((f"its Requires-Dist {str(text).split('@')[0].strip()!r}", url))
    for what, url in urls:
        found = secret_in(url)
        if found is not None:
            msg = (
                f"{path.name}: {what} holds a credential ({found}), and the index publishes it: "
                "rebuild the wheel without it (this mambawin records URLs without credentials)"
            )
            raise WheelError(msg)


def _check_is_file(path: Path) -> None:
    try:
        info = os.stat(path)
    except FileNotFoundError:
        msg = f"{path} is a symlink to nothing: point it at a wheel, or remove it"
        raise UsageError(msg) from None
    except OSError as exc:
        raise os_error(exc, "read the wheel") from None
    kind = kind_of(info.st_mode)
    if kind is not None:
        msg = f"{path} is {kind}, not a wheel: remove it from the wheelhouse"
        raise UsageError(msg)


# ---- verify records ----------------------------------------------------------------------------


def read_record(path: Path, sha256: str) -> VerifyRecord | None:
    """The verify record at path for the wheel of that sha256; None when there is none.

    Read like a wheel: lstat first (a symlink, FIFO or device is ignored unopened), then opened
    with O_NOFOLLOW and O_NONBLOCK and checked again on the open file (a path swapped since the
    lstat cannot block the run or lead elsewhere). A permission error is the OS refusing: exit 10.
    """
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise os_error(exc, "read the verify record") from None
    refused = _not_a_record(info)
    if refused:
        return VerifyRecord(ignored=f"{path.name} is {refused}")
    data = _read_record_bytes(path)
    if data is None:
        return VerifyRecord(ignored=f"{path.name} changed into something else while it was read")
    if len(data) > RECORD_LIMIT:
        return VerifyRecord(ignored=f"{path.name} is over {RECORD_LIMIT:,} bytes")
    shown, reason = record_shape(data, sha256)
    if reason:
        return VerifyRecord(ignored=f"{path.name} {reason}")
    return VerifyRecord(data, shown)


def _not_a_record(info: os.stat_result) -> str | None:
    if stat.S_ISLNK(info.st_mode):
        return "a symlink (a record is read only as a file of its own)"
    kind = kind_of(info.st_mode)
    if kind is None and info.st_size > RECORD_LIMIT:
        kind = f"{info.st_size:,} bytes, over the {RECORD_LIMIT:,} a verify record may have"
    return kind


def _read_record_bytes(path: Path) -> bytes | None:
    """At most RECORD_LIMIT + 1 bytes of a regular file; None when it is no longer one."""
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        if isinstance(exc, PermissionError):
            raise os_error(exc, "read the verify record") from None
        return None  # ELOOP: swapped for a symlink; ENXIO: a FIFO with no writer
    with os.fdopen(fd, "rb") as stream:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        try:
            return stream.read(RECORD_LIMIT + 1)
        except OSError as exc:
            raise os_error(exc, "read the verify record") from None


def record_shape(data: bytes, sha256: str) -> tuple[Mapping[str, Any] | None, str | None]:
    """What the page shows of a record, or why it is not a record of this wheel."""
    try:
        document = parse_json(data.decode("utf-8"))
    except UnicodeDecodeError:
        return None, "is not UTF-8 JSON"
    except ValueError as exc:
        return None, f"is not UTF-8 JSON ({exc})"
    if not isinstance(document, dict):
        return None, "is not a JSON object"
    passed, summary, steps = (document.get(k) for k in ("passed", "summary", "steps"))
    if not isinstance(passed, bool) or not isinstance(summary, str) or not isinstance(steps, list):
        return None, "lacks the passed/summary/steps that `mambawin verify --json` writes"
    # `verify --report FILE` writes the same verdict with the machine it ran on (`where`) and
    # the wheels' digests under `wheels`; the workflow's check job hands the index that one.
    report = document.get("kind") == REPORT_KIND
    hashes = document.get("wheels" if report else "sha256")
    if not isinstance(hashes, dict) or not all(
        isinstance(v, str) and _SHA256.fullmatch(v) for v in hashes.values()
    ):
        return None, (
            "names no wheel sha256 (an older `mambawin verify` wrote it): run "
            "`mambawin verify WHEEL --json > WHEEL.verify.json` again"
        )
    if sha256 not in hashes.values():
        return None, f"is the record of other bytes (not sha256 {sha256[:16]}…): verify it again"
    shown = {"passed": passed, "summary": summary, "checks": _checks(steps)}
    where = _where(document.get("where") if report else document.get("target"), report=report)
    return {**shown, **({"where": where} if where else {})}, None


def _checks(steps: list[Any]) -> list[list[str]]:
    """Each step that ran, as [name, status] (ok / fail / skip)."""
    return [
        [step["name"], step["status"]]
        for step in steps
        if isinstance(step, dict)
        and isinstance(step.get("name"), str)
        and step.get("status") in ("ok", "fail", "skip")
    ]


def _where(machine: object, *, report: bool) -> str:
    """Where the checks ran, in a few words: the OS (a report names it), GPU and torch."""
    if not isinstance(machine, dict):
        return ""
    if report:
        os_name, gpu, cc, torch = (machine.get(k) for k in ("os", "gpu", "capability", "torch"))
    else:
        os_name, gpu, torch = None, machine.get("gpu_name"), machine.get("torch_version")
        found = machine.get("capability")
        cc = f"sm_{found[0]}{found[1]}" if isinstance(found, list) and len(found) == 2 else None
    parts = [
        str(os_name) if isinstance(os_name, str) else "",
        f"{gpu} ({cc})" if isinstance(gpu, str) and isinstance(cc, str) else "no GPU",
        f"torch {torch}" if isinstance(torch, str) else "",
    ]
    return ", ".join(p for p in parts if p)


ATTESTATION = re.compile(r"https://[^\s\x00-\x1f\x7f]{1,2000}")


def attestation_url(text: str | None) -> str | None:
    """--attestation as given (an https address of the wheels' attestation), or UsageError."""
    if text is None:
        return None
    if ATTESTATION.fullmatch(text):
        return refuse_secrets(text, "--attestation", "every index page, which is world-readable")
    msg = (
        f"--attestation {text[:80]!r} is not an https:// address (one word, no spaces or control "
        "characters): pass the attestation's URL "
        "(actions/attest-build-provenance's attestation-url output), or leave it out"
    )
    raise UsageError(msg)
