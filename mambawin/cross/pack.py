"""Pack a cross-built stable library into a `py3-none-<platform>` wheel.

What goes in is what the configured setup.py names: its packages' `.py` files and its top-level
modules (the stable build's shim among them, under upstream's extension name), plus the library
at the top level as `<abi.stable_library(extension)>.pyd`. The wheel is written with `wheel`'s
WheelFile (repack.write_wheel, so RECORD is generated), then passed through repack.rewrite_wheel,
which checks it, rewrites its requirements for the platform (wheel/requirements.py) and records
the provenance, every member dated SOURCE_DATE_EPOCH (else the caller's epoch).

Why `.pyd`: torch.ops.load_library takes any path, so the suffix is ours to choose. `.pyd` is in
Windows' importlib EXTENSION_SUFFIXES, so a shim that finds its library by those suffixes finds
it; and the wheel tools (wheel/info.py's extensions, gpucode, verify's static step) take `.pyd` as
the wheel's binary. No Python code imports it: it exports no PyInit_ function.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

from mambawin import __version__
from mambawin.abi import STABLE_ABI_TAG, STABLE_PYTHON_TAG, torch_requirement
from mambawin.atomic import staging_dir
from mambawin.builder.configure import SetupConfig
from mambawin.errors import BuildError, UsageError
from mambawin.wheel.provenance import Provenance, source_date_epoch
from mambawin.wheel.repack import Entry, rewrite_wheel, write_wheel, zip_date_time

STABLE_SUFFIX = "_stable"
LIBRARY_SUFFIX = ".pyd"


def library_name(config: SetupConfig) -> str:
    """The stable library's module name (`causal_conv1d_cuda_stable`); UsageError when setup.py
    declares upstream's own extension, i.e. the tree is not patched for the stable ABI."""
    name = config.ext_name
    if not name.endswith(STABLE_SUFFIX) or "." in name:
        msg = (
            f"setup.py declares the extension {name!r}, not a top-level `<extension>_stable` "
            "library: patch the tree with `--abi stable` first"
        )
        raise UsageError(msg)
    return name


def shim_module(config: SetupConfig) -> str:
    """The Python module under upstream's extension name that loads the library."""
    return library_name(config).removesuffix(STABLE_SUFFIX)


def python_files(tree: Path, config: SetupConfig) -> list[tuple[str, Path]]:
    """(name in the wheel, file) for each package's .py files and each top-level module."""
    shim = shim_module(config)
    if shim not in config.py_modules:
        msg = (
            f"setup.py installs no module {shim!r} (its py_modules: "
            f"{', '.join(config.py_modules) or 'none'}): the stable patches add that shim"
        )
        raise UsageError(msg)
    found: list[tuple[str, Path]] = []
    for package in config.packages:
        folder = tree / package.replace(".", "/")
        files = sorted(folder.glob("*.py"))
        if not files:
            raise BuildError(f"setup.py names package {package!r} but {folder} has no .py file")
        found += [(f"{package.replace('.', '/')}/{f.name}", f) for f in files]
    for module in config.py_modules:
        path = tree / f"{module.replace('.', '/')}.py"
        if not path.is_file():
            raise BuildError(f"setup.py names module {module!r} but {path} does not exist")
        found.append((f"{module.replace('.', '/')}.py", path))
    return found


def requirements(install_requires: Sequence[str]) -> list[str]:
    """Requires-Dist: torch at the stable floor, then setup.py's other requirements."""
    kept = []
    for text in install_requires:
        try:
            name = Requirement(text).name
        except InvalidRequirement:
            msg = f"setup.py's install_requires has {text!r}, not a requirement: fix setup.py"
            raise BuildError(msg) from None
        if canonicalize_name(name) != "torch":
            kept.append(text)
    return [torch_requirement(), *kept]


def wheel_file_name(name: str, version: str, platform: str) -> str:
    """`<name>-<version>-py3-none-<platform>.whl` with the name escaped as the wheel spec says."""
    escaped = canonicalize_name(name).replace("-", "_")
    return f"{escaped}-{version}-{STABLE_PYTHON_TAG}-{STABLE_ABI_TAG}-{platform}.whl"


def metadata_text(name: str, version: str, requires: Sequence[str]) -> str:
    """A METADATA file: name, version and requirements."""
    lines = ["Metadata-Version: 2.1", f"Name: {name}", f"Version: {version}"]
    lines += [f"Requires-Dist: {requirement}" for requirement in requires]
    return "\n".join(lines) + "\n\n"


def wheel_text(platform: str) -> str:
    """The WHEEL file: not purelib (it holds a binary), one tag."""
    tag = f"{STABLE_PYTHON_TAG}-{STABLE_ABI_TAG}-{platform}"
    lines = ["Wheel-Version: 1.0", f"Generator: mambawin {__version__}"]
    return "\n".join([*lines, "Root-Is-Purelib: false", f"Tag: {tag}"]) + "\n"


def entries(
    tree: Path, config: SetupConfig, library: Path, platform: str, version: str
) -> Iterator[Entry]:
    """Every member of the wheel but RECORD, in a fixed order."""
    for arcname, path in python_files(tree, config):
        yield arcname, path.read_bytes(), None
    yield library_name(config) + LIBRARY_SUFFIX, library.read_bytes(), None
    dist_info = f"{canonicalize_name(config.name).replace('-', '_')}-{version}.dist-info"
    metadata = metadata_text(config.name, version, requirements(config.install_requires))
    yield f"{dist_info}/METADATA", metadata.encode("utf-8"), None
    yield f"{dist_info}/WHEEL", wheel_text(platform).encode("utf-8"), None


def pack_wheel(
    tree: Path,
    config: SetupConfig,
    library: Path,
    out_dir: Path,
    *,
    platform: str = "win_amd64",
    provenance: Provenance | None = None,
    date_epoch: int | None = None,
    version: str | None = None,
    local_version: str | None = None,
) -> Path:
    """The wheel in out_dir (written whole or not at all); the tree and library untouched.

    version: the fetched tree's version when it is not setup.py's (causal-conv1d v1.6.1.post4's
    __init__.py says 1.6.1; fetch lets the release tag win, as the build does)."""
    version = version or config.version
    if not config.name or not version:
        raise BuildError("setup.py gave no name or version: the wheel cannot be named")
    epoch = source_date_epoch()
    date_time = zip_date_time(epoch if epoch is not None else date_epoch)
    out_dir.mkdir(parents=True, exist_ok=True)
    with staging_dir(out_dir) as scratch:
        raw = scratch / wheel_file_name(config.name, version, platform)
        write_wheel(entries(tree, config, library, platform, version), raw, date_time)
        # abi "stable": Requires-Dist torch>=floor, as `build --abi stable` writes it on Linux.
        return rewrite_wheel(
            raw,
            out_dir,
            provenance=provenance,
            guard=False,
            date_epoch=date_epoch,
            local_version=local_version,
            abi="stable",
        )
