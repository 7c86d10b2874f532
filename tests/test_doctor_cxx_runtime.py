"""doctor's C++ runtime check: the host g++ must link libstdc++ as a shared library.

Real compiles (a four-line library, under a second each) with this machine's g++, and with a
wrapper that adds -static-libstdc++, as the H100 image's CXX=/opt/gcc/bin/g++ effectively did.
"""

from __future__ import annotations

import shutil
import stat
from pathlib import Path

import pytest

from mambawin.doctor.probes.cxx_runtime import cxx_runtime_check
from mambawin.stage import Status

GXX = shutil.which("g++")
pytestmark = pytest.mark.skipif(GXX is None, reason="needs g++")


def _wrapper(folder: Path, *flags: str) -> str:
    script = folder / "static-g++"
    script.write_text(f'#!/bin/sh\nexec {GXX} {" ".join(flags)} "$@"\n', encoding="utf-8")
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return str(script)


def test_a_gxx_linking_the_shared_libstdcxx_passes():
    check = cxx_runtime_check(GXX, timeout=120)
    assert check.status is Status.OK, check
    assert check.found == f"{GXX} links the shared libstdc++"


def test_a_compiler_linking_libstdcxx_statically_is_named_with_the_fix(tmp_path):
    compiler = _wrapper(tmp_path, "-static-libstdc++")
    check = cxx_runtime_check(compiler, timeout=120)
    assert check.status is Status.WARN and not check.stops_build
    assert check.found == (
        f"{compiler} links libstdc++ statically (the library defines "
        "__cxa_begin_catch, __cxa_throw, __gxx_personality_v0)"
    )
    assert check.hint is not None and "CXX=/usr/bin/g++" in check.hint


def test_a_compiler_that_cannot_build_is_a_warning_not_a_crash(tmp_path):
    check = cxx_runtime_check(_wrapper(tmp_path, "-fno-such-flag"), timeout=120)
    assert check.status is Status.WARN and "built no shared library" in (check.found or "")


def test_no_compiler_skips():
    assert cxx_runtime_check(None, timeout=1).status is Status.SKIP
