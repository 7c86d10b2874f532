"""A wheel's file name, written and read: the one rule for naming a wheel (`matrix`, `build
--plan`, `build` and the generated workflow all name a wheel here, so they agree), and the name
read back into its parts (`WheelFileName`: `parse_file_name`, and `check_tag_characters` before
a name is published).

A wheel is named after the version upstream's setup.py declares (its version file, e.g.
`causal_conv1d/__init__.py`), never the release tag: causal-conv1d's tag v1.6.1.post4 and mamba's
v2.3.2 ship files that say 1.6.1 and 2.3.1, and bdist_wheel writes what the file says. The build's
metadata step then adds the local label (`+cu130torch2.11`, `+cu130.stable.torch2.10`).
"""

from __future__ import annotations

import re
import sysconfig
from dataclasses import dataclass, replace

from packaging.utils import InvalidWheelFilename, parse_wheel_filename
from packaging.version import Version

from mambawin.abi import STABLE_ABI_TAG, STABLE_PYTHON_TAG, Abi
from mambawin.errors import WheelError
from mambawin.packages import Package

WINDOWS = "win_amd64"  # the one Windows platform tag mambawin builds, cross-builds and loads


def wheel_name(
    package: Package, version: str, label: str | None, python: str, abi: Abi, platform: str
) -> str:
    """`mamba_ssm-2.2.6+cu130torch2.11-cp312-cp312-win_amd64.whl`: python is X.Y, platform a
    wheel platform tag; a stable wheel is py3-none (any Python, any torch >= the floor)."""
    public = Version(version).public
    full = f"{public}+{label}" if label else public
    return f"{package.import_name}-{full}-{wheel_tags(python, abi, platform)}.whl"


def wheel_tags(python: str, abi: Abi, platform: str) -> str:
    """The wheel's `python-abi-platform` tags."""
    if abi == "stable":
        return f"{STABLE_PYTHON_TAG}-{STABLE_ABI_TAG}-{platform}"
    tag = "cp" + python.replace(".", "")
    return f"{tag}-{tag}-{platform}"


def platform_tag(platform: str | None = None) -> str:
    """A platform as bdist_wheel tags it (`linux-x86_64` → `linux_x86_64`); this machine's by
    default."""
    return (platform or sysconfig.get_platform()).replace("-", "_").replace(".", "_")


@dataclass(frozen=True)
class WheelFileName:
    """The five or six dash-separated parts of a wheel's file name, exactly as written."""

    name: str
    version: str
    build: str
    python: str
    abi: str
    platform: str

    @property
    def tags(self) -> frozenset[str]:
        """Every `python-abi-platform` tag the compressed tag sets in the name expand to."""
        return frozenset(
            f"{p}-{a}-{s}"
            for p in self.python.split(".")
            for a in self.abi.split(".")
            for s in self.platform.split(".")
        )

    def with_tags(self, python: str, abi: str) -> WheelFileName:
        """The same name with other python and abi tags (the platform stays)."""
        return replace(self, python=python, abi=abi)

    def with_version(self, version: str) -> str:
        """The same file name with another version (a `-` in it would split the name, so `_`)."""
        parts = [
            self.name,
            version.replace("-", "_"),
            self.build,
            self.python,
            self.abi,
            self.platform,
        ]
        return "-".join(part for part in parts if part) + ".whl"


def parse_file_name(file_name: str) -> WheelFileName:
    """Split a wheel file name into its parts; WheelError when it is not a wheel's name."""
    try:
        parse_wheel_filename(file_name)
    except InvalidWheelFilename as exc:
        msg = (
            f"{file_name} is not a wheel file name ({exc}): expected "
            "name-version[-build]-python-abi-platform.whl"
        )
        raise WheelError(msg) from None
    parts = file_name[: -len(".whl")].split("-")
    if len(parts) == 5:
        parts.insert(2, "")
    name, version, build, python, abi, platform = parts
    return WheelFileName(name, version, build, python, abi, platform)


# PEP 425: a tag is letters, digits and `_` (`.` joins a compressed set: `py2.py3`); the rest
# of a published name is PEP 440/503 text. Anything else in a link is URL syntax: `#` cuts it,
# `?` starts a query, `%` escapes, a space ends it.
_TAG_PART = re.compile(r"[A-Za-z0-9_]+")


_NAME_CHARS = re.compile(r"[A-Za-z0-9_.!+-]+\.whl")


def check_tag_characters(file_name: str) -> WheelFileName:
    """The name's parts when every tag is PEP 425 characters only, and the whole name text a
    link carries as it is; WheelError naming the first part that is not (what publishing
    checks before it writes a byte)."""
    parsed = parse_file_name(file_name)
    parts = (("python", parsed.python), ("abi", parsed.abi), ("platform", parsed.platform))
    for what, value in parts:
        bad = [p for p in value.split(".") if not _TAG_PART.fullmatch(p)]
        if bad:
            msg = (
                f"{file_name!r}: its {what} tag {bad[0]!r} holds characters a PEP 425 tag cannot "
                "(letters, digits and _ only; a link would be cut or redirected at them): "
                "rename the wheel with its true tags, or rebuild it"
            )
            raise WheelError(msg)
    if not _NAME_CHARS.fullmatch(file_name) or (parsed.build and not parsed.build[0].isdigit()):
        msg = (
            f"{file_name!r} holds characters a wheel file name cannot (letters, digits and "
            "_ . ! + - only): rename the wheel, or rebuild it"
        )
        raise WheelError(msg)
    return parsed
