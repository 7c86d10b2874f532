"""A static package index of a wheelhouse: PEP 503 pages (and PEP 691 JSON) any web server serves.

Layout of the output folder (every page relative-linked, so file://, a plain `python -m
http.server`, GitHub Pages or S3 all serve it as is):

    files/<wheel>                        each wheel once (a copy or reflink, never a link), its
                                         METADATA (PEP 658) and its verify record beside it
    simple/<project>/index.html          every wheel (for browsing; pip picks by Python, ABI and
                                         platform tags only)
    <variant>/torch<X.Y>/simple/...      the wheels a torch X.Y user of that CUDA variant can
                                         load: its own torch's, and every stable (py3-none) wheel
                                         of the CUDA major whose floor is X.Y or older; one folder
                                         for each torch minor from the oldest a wheel names to the
                                         newest the index names or was asked for (--torch, --spec)
    <variant>/simple/<project>/...       one index per CUDA variant (cu130, cu128, ...), as torch's
                                         own download.pytorch.org/whl/cu130 does; in a variant
                                         that holds wheels of more than one torch, only the wheels
                                         that fit every torch (serve.plain_wheels)
    index.html                           a page for people: the per-torch install lines, then
                                         every wheel with its provenance and verify result

Running it again adds new wheels in place. A publication: a wheel, once published, never
changes (one name in any spelling, one content, like PyPI; other bytes are refused and the run
adds nothing); files are world-readable copies, so nothing done to the wheelhouse later reaches
them. All or nothing: every input is read and checked before the first byte is written, then
the run's files are staged in a marked folder and moved into place together; a failure puts back
what was there, bytes and modes. Runs on one folder take turns; a killed run's leftovers are
removed by the next. A folder that holds anything but a mambawin index is refused, and so is a
symlink planted inside one: mambawin only changes its own files.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from mambawin.errors import UsageError
from mambawin.index.entries import (
    DEFAULT_TITLE,
    FILES,
    TITLE,
    companions,
    entry_of,
    marker,
    read_entries,
    read_marker,
)
from mambawin.index.inputs import (
    VERIFY_SUFFIX,
    Source,
    VerifyRecord,
    attestation_url,
    read_own_wheel,
    read_record,
    read_sources,
)
from mambawin.index.model import IndexedWheel
from mambawin.index.page import (
    project_html,
    project_json,
    render_page,
    root_html,
    root_json,
)
from mambawin.index.publish import (
    MARKER,
    Publication,
    check_out,
    check_targets,
    claim,
    clean_leftovers,
    conflicts,
    locked,
    make_dir,
    remove_if_fresh,
    start_index,
)
from mambawin.index.serve import (
    plain_wheels,
    serves_torch,
    serves_variant,
    torch_folders,
)
from mambawin.index.serve import torches as named_torches
from mambawin.store.atomic import Move
from mambawin.versions import release

SIMPLE = "simple"


@dataclass(frozen=True)
class IndexResult:
    """What `mambawin index` wrote."""

    out: Path
    wheels: tuple[IndexedWheel, ...]
    added: tuple[str, ...]  # wheel files new in this run
    variants: tuple[str, ...]
    pages: tuple[Path, ...] = field(default=())
    torches: Mapping[str, tuple[str, ...]] = field(default_factory=dict)  # per-torch folders

    def to_json(self) -> dict[str, Any]:
        """The stable `index --json` form."""
        return {
            "out": str(self.out),
            "added": list(self.added),
            "variants": list(self.variants),
            "simple": [
                str(self.out / SIMPLE),
                *(str(self.out / v / SIMPLE) for v in self.variants),
            ],
            "per_torch": [
                str(self.out / v / f"torch{t}" / SIMPLE)
                for v in self.variants
                for t in self.torches.get(v, ())
            ],
            "wheels": [w.to_json() for w in self.wheels],
        }


def build_index(
    wheelhouse: Path,
    out: Path,
    *,
    title: str | None = None,
    torches: Sequence[str] = (),
    attestation: str | None = None,
    lock_timeout: float = 600.0,
    move: Move = os.replace,
    own_wheel: Path | None = None,
) -> IndexResult:
    """Publish every wheel of wheelhouse in the index at out (created if absent); rewrite pages.

    All or nothing: every wheel and verify record is read and checked, and every name checked
    against what is published, before the first byte is written; then the run's files are
    staged and moved into place together, or not at all (a failure puts back what was there).
    torches: torch minors ("2.13") to make per-torch folders for, besides those the wheels name
    (remembered in the marker for later runs). title: the pages' title, remembered the same way
    (None: the one an earlier run was given, else DEFAULT_TITLE). Runs on one out wait for each
    other (a lock the OS releases even when a run is killed); a run cleans up what a killed run
    left.
    attestation: the https address of the attestation of this wheelhouse's wheels, shown beside
    each one the run adds (a published wheel keeps what it was published with).
    move: os.replace (tests make the n-th move fail).
    own_wheel: mambawin's own wheel, published beside the wheelhouse's (simple/mambawin/), so a
    team's jobs install mambawin from its index; the wheelhouse may then be empty.
    """
    attestation = attestation_url(attestation)
    if title is not None and not TITLE.fullmatch(title):  # it is kept for every later run
        msg = (
            f"--title {title!r}: give one line of 1 to 200 characters (no line break or "
            "control character), or leave it out to keep the index's own"
        )
        raise UsageError(msg)
    sources = read_sources(Path(wheelhouse), allow_empty=own_wheel is not None)
    if own_wheel is not None:
        sources.append(read_own_wheel(Path(own_wheel)))
    out = Path(out)
    check_out(out)
    created = not os.path.lexists(out)
    try:
        make_dir(out)
        with locked(out, lock_timeout):
            if created:
                start_index(out)
            claim(out)
            clean_leftovers(out)
            result = _publish(sources, out, title, tuple(torches), attestation, move)
    except BaseException:
        if created:
            remove_if_fresh(out)
        raise
    return result


@dataclass(frozen=True)
class _Plan:
    """Everything one run writes, decided before the first byte is."""

    new: tuple[Source, ...]  # wheels to copy into files/
    wheels: tuple[IndexedWheel, ...]  # every wheel of the index after the run
    files: Mapping[str, bytes]  # METADATA files, verify records, then pages: in that order
    pages: tuple[str, ...]
    folders: Mapping[str, tuple[str, ...]]  # each variant's per-torch folders
    torches: tuple[str, ...]  # asked for (--torch, --spec), now or in an earlier run
    title: str  # given now (--title), else in an earlier run, else DEFAULT_TITLE


def _publish(
    sources: list[Source],
    out: Path,
    title: str | None,
    wanted: tuple[str, ...],
    attestation: str | None,
    move: Move,
) -> IndexResult:
    plan = _plan(sources, out, title, wanted, attestation)
    check_targets(out, [*(f"{FILES}/{s.path.name}" for s in plan.new), *plan.files, MARKER])
    new = {s.path.name for s in plan.new}
    mtimes = {
        w.file: (out / FILES / w.file).stat().st_mtime_ns for w in plan.wheels if w.file not in new
    }
    with Publication(out, move) as publication:
        for source in plan.new:
            staged = publication.copy(source.path, f"{FILES}/{source.path.name}", source.sha256)
            mtimes[source.path.name] = staged.stat().st_mtime_ns  # os.replace keeps it
        for rel, data in plan.files.items():
            publication.write(rel, data)
        publication.write(MARKER, marker(plan.wheels, plan.torches, mtimes, plan.title))
        publication.commit()
    pages = tuple(out / rel for rel in plan.pages)
    return IndexResult(
        out, plan.wheels, tuple(sorted(new)), tuple(plan.folders), pages, plan.folders
    )


def _plan(
    sources: list[Source],
    out: Path,
    title: str | None,
    wanted: tuple[str, ...],
    attestation: str | None = None,
) -> _Plan:
    """What the run adds and rewrites: UsageError when a source would change a published name."""
    cached = read_marker(out)
    published = read_entries(out / FILES, cached["wheels"])
    names = conflicts(
        ((s.path.name, s.sha256) for s in sources), ((w.file, w.sha256) for w, _ in published)
    )
    known = {w.file for w, _ in published}
    # a source is new under its own name; one published already (in any spelling) is not; one
    # given twice with the same bytes (mambawin's wheel also in the wheelhouse) goes in once
    new = tuple(
        {
            s.path.name: s
            for s in sources
            if names[s.path.name] == s.path.name and s.path.name not in known
        }.values()
    )
    records = {names[s.path.name]: s.record for s in sources if s.record is not None}
    added = (
        (replace(entry_of(s), attestation=attestation if s.attested else None), s.metadata)
        for s in new
    )
    entries = [*published, *added]
    wheels = tuple(
        sorted(
            (_with_verify(w, out / FILES, records.get(w.file)) for w, _ in entries),
            key=lambda w: w.file,
        )
    )
    torches = tuple(sorted({*wanted, *cached["torches"]}, key=lambda t: release(t, 2)))
    title = title if title is not None else cached["title"] or DEFAULT_TITLE
    pages, folders = _pages(wheels, title, torches)
    pages |= dict(_emptied(out, pages))
    files = {**dict(companions(entries, records)), **pages}
    return _Plan(new, wheels, files, tuple(pages), folders, torches, title)


def _with_verify(wheel: IndexedWheel, files: Path, record: VerifyRecord | None) -> IndexedWheel:
    """The wheel with the verify result its page shows: the wheelhouse's record, else the one
    published; when a record is ignored, why (for --json)."""
    published = read_record(files / (wheel.file + VERIFY_SUFFIX), wheel.sha256)
    shown = next((r for r in (record, published) if r is not None and r.shown is not None), None)
    ignored = next((r.ignored for r in (record, published) if r is not None and r.ignored), None)
    return replace(wheel, verify=shown.shown if shown else None, verify_ignored=ignored)


def _pages(
    wheels: Sequence[IndexedWheel], title: str, wanted: Sequence[str]
) -> tuple[dict[str, bytes], dict[str, tuple[str, ...]]]:
    """Every page of the index (relative path -> bytes) and the per-torch folders of each
    variant."""
    variants = sorted({w.variant for w in wheels if w.variant})
    pages = dict(_simple(SIMPLE, wheels))
    folders: dict[str, tuple[str, ...]] = {}
    newest = [*wanted, *named_torches(wheels)]
    for variant in variants:
        chosen = [w for w in wheels if serves_variant(w, variant)]
        pages.update(_simple(f"{variant}/{SIMPLE}", plain_wheels(chosen)))
        folders[variant] = torch_folders(chosen, newest)
        for torch in folders[variant]:
            picked = [w for w in chosen if serves_torch(w, torch)]
            pages.update(_simple(f"{variant}/torch{torch}/{SIMPLE}", picked))
    page = render_page(title, wheels, folders)
    pages["index.html"] = page.encode("utf-8")
    return pages, folders


def _emptied(out: Path, pages: Mapping[str, bytes]) -> Iterator[tuple[str, bytes]]:
    """An empty project page for each project page published earlier under a root the run
    writes that lists no wheel now (a variant's plain folder once it serves several torches):
    a stale page would still hand pip the wheel it no longer lists."""
    for root in (rel.removesuffix("/index.html") for rel in pages if _is_root(rel)):
        try:
            folders = [p for p in (out / root).iterdir() if stat.S_ISDIR(p.lstat().st_mode)]
        except FileNotFoundError:
            continue
        for folder in folders:
            if (
                folder / "index.html"
            ).is_file() and f"{root}/{folder.name}/index.html" not in pages:
                yield from _project(root, folder.name, [])


def _is_root(rel: str) -> bool:
    return rel == f"{SIMPLE}/index.html" or rel.endswith(f"/{SIMPLE}/index.html")


# ---- pages -------------------------------------------------------------------------------------


def _simple(root: str, wheels: Iterable[IndexedWheel]) -> Iterator[tuple[str, bytes]]:
    """PEP 503 root and project pages (plus PEP 691 JSON twins) for wheels under root."""
    by_project: dict[str, list[IndexedWheel]] = {}
    for wheel in wheels:
        by_project.setdefault(wheel.project, []).append(wheel)
    for project, chosen in sorted(by_project.items()):
        yield from _project(root, project, chosen)
    yield f"{root}/index.html", _utf8(root_html(sorted(by_project)))
    yield f"{root}/index.json", _utf8(root_json(sorted(by_project)))


def _project(
    root: str, project: str, wheels: Sequence[IndexedWheel]
) -> Iterator[tuple[str, bytes]]:
    """One project's page and its JSON twin under root (`cu130/torch2.11/simple`)."""
    files_url = "../" * (root.count("/") + 2) + FILES + "/"
    yield f"{root}/{project}/index.html", _utf8(project_html(project, wheels, files_url))
    yield f"{root}/{project}/index.json", _utf8(project_json(project, wheels, files_url))


def _utf8(text: str) -> bytes:
    return text.encode("utf-8")
