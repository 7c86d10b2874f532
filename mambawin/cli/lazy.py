"""The root's commands, loaded when used: `mambawin --help` lists them from the registry and
imports no command module; a command's module is imported when that command runs or shows its own
help. And flags, which take no value, show no `<bool>` type in help."""

from __future__ import annotations

import importlib
from collections.abc import Iterator, MutableMapping
from typing import Any

from typer.core import TyperCommand

from mambawin.cli import registry


class LazyCommands(MutableMapping[str, Any]):
    """The root's commands by name, in the registry's order; a command's module is imported the
    first time the command itself is asked for (to run it, or for its own help)."""

    def __init__(self, loaded: dict[str, Any]) -> None:
        self._loaded = loaded  # those typer built already (their module was imported first)

    def loaded(self, name: str) -> bool:
        return name in self._loaded

    def __getitem__(self, name: str) -> Any:
        if name not in self._loaded:
            if name not in registry.BY_NAME:
                raise KeyError(name)
            self._loaded[name] = _load(registry.BY_NAME[name])
        return self._loaded[name]

    def __setitem__(self, name: str, command: Any) -> None:
        self._loaded[name] = command

    def __delitem__(self, name: str) -> None:
        del self._loaded[name]

    def __iter__(self) -> Iterator[str]:
        yield from (entry.name for entry in registry.COMMANDS)
        yield from (name for name in self._loaded if name not in registry.BY_NAME)

    def __len__(self) -> int:
        return len(set(registry.BY_NAME) | set(self._loaded))


def _load(entry: registry.Entry) -> Any:
    """entry's click command: its module imported (it registers on `app`), then built by typer."""
    importlib.import_module(f"mambawin.cli.{entry.module}")
    main = importlib.import_module("typer.main")
    app = importlib.import_module("mambawin.cli.app").app
    for info in app.registered_commands:
        if info.name == entry.name:
            return main.get_command_from_info(
                info,
                pretty_exceptions_short=app.pretty_exceptions_short,
                rich_markup_mode=app.rich_markup_mode,
            )
    for group_info in app.registered_groups:
        if group_info.name == entry.name:
            return main.get_group_from_info(
                group_info,
                pretty_exceptions_short=app.pretty_exceptions_short,
                suggest_commands=app.suggest_commands,
                rich_markup_mode=app.rich_markup_mode,
            )
    raise LookupError(f"mambawin.cli.{entry.module} does not define {entry.name}")


def listed(name: str) -> Any:
    """The stand-in `mambawin --help` lists for a command not loaded: its name, panel, summary."""
    entry = registry.BY_NAME[name]
    listed = TyperCommand(name, short_help=entry.summary, help=entry.summary)
    listed.rich_help_panel = entry.panel  # where typer's help groups it
    return listed


class FlagsShowNoType:
    """A flag shows no `<bool>` type in help: it takes no value to type."""

    def get_params(self, ctx: Any) -> list[Any]:
        params: list[Any] = super().get_params(ctx)  # type: ignore[misc]
        for param in params:
            if getattr(param, "is_flag", False):
                # typer builds its own option objects: the class is swapped for one that says so
                param.__class__ = _flag_class(type(param))
            elif getattr(param, "multiple", False):
                param.__class__ = _list_class(type(param))
        return params


def _no_type(self: Any, ctx: Any) -> str | None:
    return None


_FLAG_CLASSES: dict[type, type] = {}
_LIST_CLASSES: dict[type, type] = {}


def _element_type(self: Any, ctx: Any) -> str | None:
    """`<str,…>` for a repeatable, comma-separated option: typer showed Python's `<list[str]>`."""
    shown: str | None = super(type(self), self).display_type_rich(ctx)
    if shown and shown.startswith("<list[") and shown.endswith("]>"):
        return f"<{shown[6:-2]},…>"
    return shown


def _list_class(base: type) -> type:
    """base, or its subclass whose help shows the element type of a list (one per base)."""
    if base.__dict__.get("display_type_rich") is _element_type:
        return base
    if base not in _LIST_CLASSES:
        _LIST_CLASSES[base] = type(
            f"List{base.__name__}", (base,), {"display_type_rich": _element_type}
        )
    return _LIST_CLASSES[base]


def _flag_class(base: type) -> type:
    """base, or its subclass whose help shows no type (one per base)."""
    if base.__dict__.get("display_type_rich") is _no_type:
        return base
    if base not in _FLAG_CLASSES:
        _FLAG_CLASSES[base] = type(f"Flag{base.__name__}", (base,), {"display_type_rich": _no_type})
    return _FLAG_CLASSES[base]
