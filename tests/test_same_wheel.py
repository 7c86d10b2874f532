"""Every backend writes the same wheel: a native build (setup.py bdist_wheel, then the packing
step) and a cross build (cross.pack with setuptools' .dist-info, then the same step) of one tree
differ only in their binary and platform tag. The tree is the hand-written stable_ext fixture,
whose setup.py carries upstream-style metadata and licence files and a placeholder build_ext."""

from __future__ import annotations

import shutil
import sys
import zipfile
from dataclasses import replace
from pathlib import Path

import pytest

from mambawin import proc
from mambawin.builder.configure import DistInfo, configure
from mambawin.builder.metadata import pack
from mambawin.cross import pack as cross_pack
from mambawin.wheel.guard import GUARD_BEGIN
from mambawin.wheel.provenance import Provenance, read_provenance
from tests.test_cross_windows import FIXTURE, fixture_config

EPOCH = 1700000000
LABEL = "cu130.stable.torch2.10"
PROVENANCE = Provenance(
    upstream_repo="https://example.invalid/stable-demo",
    ref="v0.1.0",
    commit="c0ffee",
    version="0.1.0",
    archs=("sm_90",),
    cuda_version="13.0",
    abi="stable",
    torch_floor="2.10",
    build_date="2023-11-14T22:13:20+00:00",
)


def native_wheel(tmp_path: Path) -> Path:
    """What `build --abi stable` does on Linux: setup.py bdist_wheel, then the packing step."""
    tree = tmp_path / "native-tree"
    shutil.copytree(FIXTURE, tree)
    (tree / "MAMBAWIN_FAKE_UPSTREAM").write_text("its build_ext writes a placeholder\n")
    dist = tmp_path / "native-dist"
    argv = [sys.executable, "setup.py", "-q", "bdist_wheel", "--dist-dir", str(dist)]
    proc.run(argv, cwd=tree, timeout=300)
    (raw,) = dist.glob("*.whl")
    return pack(raw, tmp_path / "native", PROVENANCE, label=LABEL, epoch=EPOCH, abi="stable")


def cross_wheel(tmp_path: Path) -> Path:
    """What `build --abi stable --platform win_amd64` does after its link: configure's .dist-info,
    then cross.pack (the library is a stand-in: its bytes are never compared)."""
    folder = tmp_path / "dist-info"
    folder.mkdir()
    configured = configure(FIXTURE, dist_info=DistInfo(folder, "py3-none-win_amd64"))
    library = tmp_path / "stable_demo_cuda_stable.pyd"
    library.write_bytes(b"MZ a library")
    config = replace(fixture_config(), dist_info=configured.dist_info)
    return cross_pack.pack_wheel(
        FIXTURE,
        config,
        library,
        tmp_path / "cross",
        provenance=PROVENANCE,
        date_epoch=EPOCH,
        local_version=LABEL,
    )


# METADATA headers the rewrite sets for the wheel's platform (wheel/headers.py): a Windows wheel
# says Windows and the Python its floor needs, a Linux one keeps upstream's.
_PLATFORM_HEADERS = (b"Classifier: Operating System ::", b"Requires-Python:")


def members(wheel: Path) -> dict[str, bytes]:
    """Each member but the binary; WHEEL without its Tag line, METADATA without the headers set
    for the platform, RECORD's lines in order without the binary's, WHEEL's and METADATA's
    (their bytes differ by the platform; the rest is compared as it is)."""
    with zipfile.ZipFile(wheel) as archive:
        found = {name: archive.read(name) for name in archive.namelist()}
    binary = next(n for n in found if n.startswith("stable_demo_cuda_stable."))
    del found[binary]
    for name, data in found.items():
        lines = data.splitlines(keepends=True)
        if name.endswith("/WHEEL"):
            found[name] = b"".join(line for line in lines if not line.startswith(b"Tag:"))
        elif name.endswith("/METADATA"):
            found[name] = b"".join(line for line in lines if not line.startswith(_PLATFORM_HEADERS))
        elif name.endswith("/RECORD"):
            cut = (
                binary.encode(),
                name.replace("RECORD", "WHEEL").encode(),
                name.replace("RECORD", "METADATA").encode(),
            )
            found[name] = b"".join(sorted(line for line in lines if not line.startswith(cut)))
    return found


@pytest.fixture
def both(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path]:
    monkeypatch.delenv("SOURCE_DATE_EPOCH", raising=False)
    return native_wheel(tmp_path), cross_wheel(tmp_path)


def test_a_native_and_a_cross_wheel_differ_only_in_binary_and_platform_tag(
    both: tuple[Path, Path],
) -> None:
    native, cross = both
    assert native.name == f"stable_demo-0.1.0+{LABEL}-py3-none-linux_x86_64.whl"
    assert cross.name == f"stable_demo-0.1.0+{LABEL}-py3-none-win_amd64.whl"
    left, right = members(native), members(cross)
    assert sorted(left) == sorted(right)
    differing = [name for name in left if left[name] != right[name]]
    assert differing == []


def test_the_cross_wheel_carries_the_guard_the_licences_and_upstreams_fields(
    both: tuple[Path, Path],
) -> None:
    _, cross = both
    dist_info = f"stable_demo-0.1.0+{LABEL}.dist-info"
    with zipfile.ZipFile(cross) as archive:
        init = archive.read("stable_demo/__init__.py").decode()
        metadata = archive.read(f"{dist_info}/METADATA").decode()
        licence = archive.read(f"{dist_info}/licenses/LICENSE").decode()
        names = archive.namelist()
    assert GUARD_BEGIN in init and 'built_torch, built_cuda = "2.10", "13"' in init
    # the floor torch's Python, not upstream's >=3.9; Windows, not upstream's Unix
    assert "Requires-Python: >=3.10" in metadata
    assert "Summary: A hand-written stable-ABI demo extension" in metadata
    assert "Requires-Dist: torch>=2.10" in metadata
    assert "BSD-3 licence asks of binaries" in licence
    assert f"{dist_info}/licenses/AUTHORS" in names
    assert read_provenance(cross).stored["build_date"] == PROVENANCE.build_date
