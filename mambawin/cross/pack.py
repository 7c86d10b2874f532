"""Pack a cross-built stable library into a `py3-none-<platform>` wheel.

What goes in is what the configured setup.py names: its packages' `.py` files and its top-level
modules (the stable build's shim among them, under upstream's extension name), the library at the
top level as `<abi.stable_library(extension)>.pyd`, and the .dist-info setuptools wrote for it
(configure's DistInfo: METADATA with upstream's fields, the licence files, top_level.txt, WHEEL),
the files bdist_wheel puts in a native wheel. The raw wheel (writer.write_wheel) then goes through
builder.metadata.pack, the packing step a native build ends with too: requirements for the
platform, the torch/CUDA import guard, the label, the provenance and RECORD, every member dated
SOURCE_DATE_EPOCH (else the caller's epoch).

Why `.pyd`: torch.ops.load_library takes any path, so the suffix is ours to choose. `.pyd` is in
Windows' importlib EXTENSION_SUFFIXES, so a shim that finds its library by those suffixes finds
it; and the wheel tools (wheel/info.py's extensions, gpucode, verify's static step) take `.pyd` as
the wheel's binary. No Python code imports it: it exports no PyInit_ function.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from mambawin.abi import STABLE_ABI_TAG, STABLE_PYTHON_TAG, STABLE_SUFFIX
from mambawin.builder.configure import SetupConfig
from mambawin.builder.metadata import pack
from mambawin.errors import BuildError, UsageError
from mambawin.store.atomic import staging_dir
from mambawin.wheel.naming import WINDOWS
from mambawin.wheel.provenance import Provenance, source_date_epoch
from mambawin.wheel.writer import Entry, write_wheel, zip_date_time

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


def dist_info_files(config: SetupConfig) -> list[tuple[str, Path]]:
    """(name in the wheel, file) for each file of the .dist-info setuptools wrote (configure's
    DistInfo): METADATA, WHEEL, top_level.txt and the licence files, as bdist_wheel packs them."""
    folder = config.dist_info
    if folder is None or not (folder / "METADATA").is_file():
        msg = "configure wrote no .dist-info for the tree: configure it with a DistInfo request"
        raise BuildError(msg)
    files = sorted(p for p in folder.rglob("*") if p.is_file())
    return [(f"{folder.name}/{p.relative_to(folder).as_posix()}", p) for p in files]


def entries(tree: Path, config: SetupConfig, library: Path) -> Iterator[Entry]:
    """Every member of the wheel but RECORD, in a fixed order."""
    for arcname, path in python_files(tree, config):
        yield arcname, path.read_bytes(), None
    yield library_name(config) + LIBRARY_SUFFIX, library.read_bytes(), None
    for arcname, path in dist_info_files(config):
        yield arcname, path.read_bytes(), None


def pack_wheel(
    tree: Path,
    config: SetupConfig,
    library: Path,
    out_dir: Path,
    *,
    platform: str = WINDOWS,
    provenance: Provenance | None = None,
    date_epoch: int | None = None,
    local_version: str | None = None,
) -> Path:
    """The wheel in out_dir (written whole or not at all); the tree and library untouched.

    The version is the .dist-info's (configure's DistInfo sets the fetched one when setup.py says
    less: causal-conv1d v1.6.1.post4's __init__.py says 1.6.1)."""
    stem = dist_info_files(config)[0][0].split("/")[0].removesuffix(".dist-info")
    epoch = source_date_epoch()
    date_time = zip_date_time(epoch if epoch is not None else date_epoch)
    out_dir.mkdir(parents=True, exist_ok=True)
    with staging_dir(out_dir) as scratch:
        raw = scratch / f"{stem}-{STABLE_PYTHON_TAG}-{STABLE_ABI_TAG}-{platform}.whl"
        write_wheel(entries(tree, config, library), raw, date_time)
        return pack(raw, out_dir, provenance, label=local_version, epoch=date_epoch, abi="stable")
