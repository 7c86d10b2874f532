"""The one rule for a wheel's file name: `matrix`, `build --plan`, `build` and the generated
workflow all name a wheel here, so they agree.

A wheel is named after the version upstream's setup.py declares (its version file, e.g.
`causal_conv1d/__init__.py`), never the release tag: causal-conv1d's tag v1.6.1.post4 and mamba's
v2.3.2 ship files that say 1.6.1 and 2.3.1, and bdist_wheel writes what the file says. The build's
metadata step then adds the local label (`+cu130torch2.11`, `+cu130.stable.torch2.10`).
"""

from __future__ import annotations

import sysconfig

from packaging.version import Version

from mambawin.abi import STABLE_ABI_TAG, STABLE_PYTHON_TAG, Abi
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
