"""`mambawin cache`: the build folders and kept builds in mambawin's cache, and pruning them."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Annotated

import typer
from rich.markup import escape

from mambawin.builder.kept import KEEP_MB_BOUND
from mambawin.cli.app import command, examples, print_json, print_table
from mambawin.errors import UsageError
from mambawin.ui.console import console, out, printable

if TYPE_CHECKING:
    from mambawin.builder.kept import Foreign, Kept
    from mambawin.store.cache_usage import CacheUsage


@command(
    "cache",
    cache=True,
    epilog=examples("mambawin cache", "mambawin cache --prune --keep-mb 5000"),
)
def cache_command(
    prune: Annotated[
        bool, typer.Option("--prune", help="Remove the least recently used kept builds.")
    ] = False,
    keep_mb: Annotated[
        int | None,
        typer.Option(
            "--keep-mb",
            min=0,
            max=KEEP_MB_BOUND,
            help="With --prune: keep at most this many MB (0 removes every kept build).",
            show_default="$MAMBAWIN_KEEP_MB, else 10000",
        ),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the result as JSON.")] = False,
) -> None:
    """Show what mambawin's cache holds, by kind and size; --prune bounds the kept builds.

    A kept build is a build's objects: a rebuild of its key reuses every one. Entries under
    kept/ that mambawin did not make are listed as foreign and never touched. The whole cache
    moves with MAMBAWIN_CACHE_DIR."""
    from mambawin.builder import kept
    from mambawin.store import cache_usage

    if keep_mb is not None and not prune:
        raise UsageError("--keep-mb is the bound --prune applies: add --prune, or drop --keep-mb")
    removed = []
    if prune:
        limit = kept.keep_limit() if keep_mb is None else keep_mb * 1_000_000
        removed = kept.evict(limit)
    entries = kept.listing()
    others = kept.foreign()
    held = cache_usage.usage()
    if as_json:
        print_json(
            {
                "kept": [_row_json(k) for k in entries],
                "removed": [_row_json(k) for k in removed],
                "foreign": [_foreign_json(f) for f in others],
                "total_bytes": sum(k.size for k in entries),
                "folder": str(kept.kept_root()),
                "cache": held.to_json(),
            }
        )
        return
    _show_usage(held)
    if entries:
        rows = [_row(k) for k in entries]
        columns = ("key", "slot", "MB", "last used")
        print_table("kept builds (most recently used first)", columns, rows)
    if others:
        foreign_rows: list[tuple[str, ...]] = [
            (_text(f.name), f.kind, _text(str(f.path))) for f in others
        ]
        print_table(
            "foreign (not made by mambawin: never removed)", ("name", "kind", "path"), foreign_rows
        )
    if removed:
        freed = sum(k.size for k in removed) / 1e6
        print_table("removed", ("key", "slot", "MB", "last used"), [_row(k) for k in removed])
        typer.echo(f"freed {freed:.0f} MB", err=True)


def _show_usage(held: CacheUsage) -> None:
    """The cache folder, its size, each kind in it, and how to move it."""
    from mambawin.store.cache_usage import human

    folder = _text(str(held.folder))
    out.print(f"mambawin's cache: {folder} ({human(held.total)})", soft_wrap=True)
    rows = [(_text(e.what), _text(e.name), human(e.size)) for e in held.entries]
    if rows:
        print_table("", ("what", "folder", "size"), rows)
    else:
        out.print("  empty")
    console.print(f"[dim]to move it: {held.how_to_move}[/]")


def _row(entry: Kept) -> tuple[str, ...]:
    when = time.strftime("%Y-%m-%d %H:%M", time.localtime(entry.last_used))
    return (_text(entry.key[:16]), _text(entry.slot), f"{entry.size / 1e6:.0f}", when)


def _text(name: str) -> str:
    """A name read from the cache, shown as it is: never rich markup (`[/x]` broke the table),
    never a line break or an escape sequence the terminal would act on."""
    return escape(printable(name))


def _row_json(entry: Kept) -> dict[str, object]:
    return {
        "key": entry.key,
        "slot": entry.slot,
        "bytes": entry.size,
        "last_used": entry.last_used,
        "path": str(entry.path),
    }


def _foreign_json(entry: Foreign) -> dict[str, object]:
    return {"name": entry.name, "kind": entry.kind, "path": str(entry.path)}
