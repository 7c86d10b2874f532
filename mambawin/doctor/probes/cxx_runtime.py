"""Does the host C++ compiler link libstdc++ as a shared library into an extension?

One that links it statically (the H100 image's `CXX=/opt/gcc/bin/g++` does) gives every library
it builds its own copy of the C++ runtime. An exception such a library throws cannot be caught by
torch's runtime: on torch 2.11 each check a stable binding threw ended the process with SIGSEGV
instead of raising RuntimeError (docs/benchmarks.md §15). The probe builds a four-line throwing
library with the compiler and reads which runtime entry points it defines itself
(`wheel.imports`), the same fact verify's import audit judges in a built wheel.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from mambawin import proc
from mambawin.errors import MambawinError
from mambawin.stage import Status
from mambawin.toolchain.probe import Check
from mambawin.wheel.imports import read_imports

NAME = "C++ runtime"

PROBE_SOURCE = """#include <stdexcept>
extern "C" int mambawin_probe(int bad) {
    if (bad) throw std::runtime_error("probe");
    return 0;
}
"""


def runtime_defined(compiler: str, timeout: float) -> tuple[str, ...]:
    """The C++ runtime entry points a shared library built by `compiler` defines itself: () when
    it links the shared libstdc++. MambawinError or OSError when the compiler built none."""
    with tempfile.TemporaryDirectory(prefix="mambawin-cxx-runtime-") as folder:
        source, library = Path(folder, "probe.cpp"), Path(folder, "probe.so")
        source.write_text(PROBE_SOURCE, encoding="utf-8")
        proc.run([compiler, "-shared", "-fPIC", "-o", str(library), str(source)], timeout=timeout)
        return read_imports(library.read_bytes(), library.name).runtime_defined


def cxx_runtime_check(compiler: str | None, timeout: float) -> Check:
    """ok when `compiler` links the shared libstdc++; warn when it carries a static copy."""
    if compiler is None:
        return Check(NAME, Status.SKIP, found="no host compiler (see host compiler)")
    try:
        defined = runtime_defined(compiler, timeout)
    except (MambawinError, OSError) as exc:
        return Check(NAME, Status.WARN, found=f"{compiler} built no shared library: {exc}")
    if not defined:
        return Check(NAME, Status.OK, found=f"{compiler} links the shared libstdc++")
    return Check(
        NAME,
        Status.WARN,
        found=f"{compiler} links libstdc++ statically (the library defines {', '.join(defined)})",
        required="the shared libstdc++ (libstdc++.so.6)",
        hint=(
            "an extension built so ends the process on any C++ error instead of raising, and "
            "verify refuses its stable wheel: set CXX to a g++ that links libstdc++.so.6 "
            "(e.g. CXX=/usr/bin/g++)"
        ),
    )
