"""The Windows registry behind a small interface, so the Windows probes run in tests on Linux."""

from __future__ import annotations

import sys
from collections.abc import Mapping
from typing import Protocol

HKLM = "HKEY_LOCAL_MACHINE"
HKCU = "HKEY_CURRENT_USER"


class RegistryReader(Protocol):
    """Reads one registry value; None when the key or the value does not exist or cannot be read."""

    def read_value(self, root: str, key: str, name: str) -> object | None: ...


class MappingRegistry:
    """A registry held in a dict keyed by (root, key, name); keys compare case-insensitively."""

    def __init__(self, values: Mapping[tuple[str, str, str], object] | None = None) -> None:
        self._values = {_fold(k): v for k, v in (values or {}).items()}

    def read_value(self, root: str, key: str, name: str) -> object | None:
        """The stored value, or None."""
        return self._values.get(_fold((root, key, name)))


class WinRegReader:
    """The real registry through the standard winreg module (Windows only)."""

    def read_value(self, root: str, key: str, name: str) -> object | None:
        """The value's data, or None when missing or unreadable (access denied is not an answer)."""
        if sys.platform != "win32":
            return None
        import winreg

        hive = getattr(winreg, root)
        try:
            with winreg.OpenKey(hive, key) as handle:
                data, _kind = winreg.QueryValueEx(handle, name)
        except OSError:
            return None
        return data


def default_registry(platform: str = sys.platform) -> RegistryReader:
    """The real registry on Windows, an empty one elsewhere."""
    return WinRegReader() if platform == "win32" and sys.platform == "win32" else MappingRegistry()


def _fold(key: tuple[str, str, str]) -> tuple[str, str, str]:
    root, path, name = key
    return (root.upper(), path.lower().replace("/", "\\").strip("\\"), name.lower())
