"""Reading a team spec: TOML parsed with tomllib (tomli on 3.10) and every key validated; an
unknown key, a wrong type or bad TOML raises SpecError with one line naming the file, the line and
the key."""

from __future__ import annotations

import re
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from mambawin import userfile
from mambawin.abi import ABIS, Abi, parse_abi
from mambawin.archs import Arch, parse_arch, parse_archs
from mambawin.builder.backends import SPEC_OPTIONS
from mambawin.errors import SpecError, UsageError
from mambawin.fetch import git
from mambawin.fetch.sdist import SOURCES
from mambawin.packages import PACKAGE_NAMES, get_package
from mambawin.patch.registry import every_patch_id, unknown_ids
from mambawin.secret_urls import WHERE_SECRETS_GO, secret_in
from mambawin.team.spec import (
    _INDEX_CUDA,
    _URL,
    DEFAULT_SPEC,
    EXPRESSION,
    MIN_PYTHON,
    PLATFORMS,
    RUNNER_LABEL,
    SPEC_KEYS,
    TABLE_KEYS,
    TORCH_INDEX,
    CiSpec,
    Options,
    PackageSpec,
    Spec,
    TorchSpec,
    dotted,
    find_line,
    not_windows,
)

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.10 only
    import tomli as tomllib


def load_spec(path: Path | str = DEFAULT_SPEC) -> Spec:
    """Read and validate a spec file; SpecError (one line: file, line, key) when it is wrong."""
    path = Path(path)
    text = userfile.read_text(
        path, what="spec", error=SpecError, missing=f"write one with `mambawin init --out {path}`"
    )
    return parse_spec(text, path)


def parse_spec(text: str, path: Path) -> Spec:
    """Validate the TOML text of a spec whose file is path (for messages and relative paths)."""
    try:
        data = userfile.parse_toml(text)
    except tomllib.TOMLDecodeError as exc:
        msg = f"{path}: invalid TOML: {exc}"
        raise SpecError(msg) from None
    reader = _Reader(path, text)
    return reader.spec(data)


class _Reader:
    """Validates the parsed TOML, naming the line of any key it rejects."""

    def __init__(self, path: Path, text: str) -> None:
        self.path = path
        self.lines = _key_lines(text)

    def fail(self, where: tuple[str | int, ...], problem: str) -> SpecError:
        line = find_line(self.lines, where)
        at = f"{self.path}:{line}" if line else str(self.path)
        return SpecError(f"{at}: {dotted(where)}: {problem}")

    def spec(self, data: dict[str, Any]) -> Spec:
        self.known(data, (), tuple(k.toml_name for k in SPEC_KEYS))
        base = self.path.parent
        index = self.public(self.optional_str(data, ("index",)), ("index",))
        return Spec(
            path=self.path,
            packages=self.packages(self.required(data, ("package",))),
            pythons=self.pythons(self.required(data, ("python",))),
            torches=self.torches(self.required(data, ("torch",))),
            archs=self.archs(self.required(data, ("archs",))),
            platforms=self.platforms(data.get("platforms", ["win_amd64"])),
            wheelhouse=base / (self.optional_str(data, ("wheelhouse",)) or "wheelhouse"),
            index=index if index is None or _URL.match(index) else str(base / index),
            options=self.options(data.get("options", {})),
            ci=self.ci(data.get("ci", {})),
            lines=self.lines,
        )

    # -- sections --

    def packages(self, value: object) -> tuple[PackageSpec, ...]:
        tables = self.tables(value, ("package",))
        found = tuple(self.package(table, ("package", i)) for i, table in enumerate(tables))
        names = [p.name for p in found]
        for i, name in enumerate(names):
            if name in names[:i]:
                raise self.fail(
                    ("package", i, "name"),
                    f"{name} is listed twice: keep one [[package]] per package (one ref each)",
                )
        return found

    def package(self, table: dict[str, Any], where: tuple[str | int, ...]) -> PackageSpec:
        self.known(table, where, TABLE_KEYS["package"])
        raw = self.string(self.required(table, (*where, "name")), (*where, "name"))
        name = canonicalize_name(raw)
        if name not in PACKAGE_NAMES:
            raise self.fail(
                (*where, "name"), f"unknown package {raw!r}: use one of " + ", ".join(PACKAGE_NAMES)
            )
        version = self.optional_str(table, (*where, "version"))
        if version is not None:
            version = str(self.version(version, (*where, "version")))
        return PackageSpec(
            name=name,
            ref=self.ref(self.required(table, (*where, "ref")), (*where, "ref")),
            repo=self.repo(self.optional_str(table, (*where, "repo")), (*where, "repo"))
            or get_package(name).default_repo,
            version=version,
        )

    def torches(self, value: object) -> tuple[TorchSpec, ...]:
        tables = self.tables(value, ("torch",))
        return tuple(self.torch(table, ("torch", i)) for i, table in enumerate(tables))

    def torch(self, table: dict[str, Any], where: tuple[str | int, ...]) -> TorchSpec:
        self.known(table, where, TABLE_KEYS["torch"])
        version = self.string(self.required(table, (*where, "version")), (*where, "version"))
        self.version(version, (*where, "version"))
        index = self.public(self.optional_str(table, (*where, "index")), (*where, "index"))
        if index is not None and not _URL.match(index):
            raise self.fail(
                (*where, "index"),
                f"{index!r} is not a URL: give the index torch "
                "comes from, e.g. https://download.pytorch.org/whl/cu130",
            )
        cuda = self.cuda(table.get("cuda"), index, where)
        digits = cuda.replace(".", "")
        return TorchSpec(version=version, cuda=cuda, index=index or TORCH_INDEX.format(cuda=digits))

    def cuda(self, value: object, index: str | None, where: tuple[str | int, ...]) -> str:
        """'13.0' or 'cu130' as given, else read from an index URL ending in /cu130."""
        if value is None:
            match = _INDEX_CUDA.search(index or "")
            if match is None:
                raise self.fail(
                    (*where, "cuda"),
                    "missing: give the CUDA variant, e.g. "
                    'cuda = "13.0" (or an index URL ending in /cu130)',
                )
            value = f"cu{match[1]}"
        text = self.string(value, (*where, "cuda")).lower().removeprefix("cu")
        if re.fullmatch(r"\d{2,3}", text):
            text = f"{text[:-1]}.{text[-1]}"
        release = self.version(text, (*where, "cuda")).release
        if len(release) < 2 or not 10 <= release[0] <= 20:
            raise self.fail(
                (*where, "cuda"), f'{value!r} is not a CUDA version: use e.g. "12.8" or "cu128"'
            )
        return f"{release[0]}.{release[1]}"

    def pythons(self, value: object) -> tuple[str, ...]:
        found: list[str] = []
        for text in self.strings(value, ("python",)):
            version = self.version(text, ("python",))
            if len(version.release) != 2 or version < MIN_PYTHON:
                raise self.fail(
                    ("python",),
                    f"{text!r}: give CPython versions as X.Y, "
                    f"{MIN_PYTHON} or newer (mambawin runs in each build environment)",
                )
            if text not in found:
                found.append(text)
        return tuple(found)

    def archs(self, value: object) -> tuple[Arch, ...]:
        texts = [value] if isinstance(value, str) else self.strings(value, ("archs",))
        try:
            return parse_archs([str(t) for t in texts])
        except UsageError as exc:
            problem = str(exc).replace(" in --arch", "").replace("--arch", "archs")
            raise self.fail(("archs",), problem) from None

    def platforms(self, value: object) -> tuple[str, ...]:
        texts = self.strings(value, ("platforms",))
        for text in texts:
            if text not in PLATFORMS:
                raise self.fail(
                    ("platforms",), f"unknown platform {text!r}: use one of " + ", ".join(PLATFORMS)
                )
        return tuple(dict.fromkeys(texts))

    def options(self, value: object) -> Options:
        """[options], each key checked by its kind as build's option declaration gives it
        (builder.backends.SPEC_OPTIONS): a flag is a bool, a list holds strings, a value is a
        string; then what each value means (a known patch id, an ABI)."""
        table = self.table(value, ("options",))
        self.known(table, ("options",), TABLE_KEYS["options"])
        values: dict[str, Any] = {}
        for option in SPEC_OPTIONS:
            key = str(option.spec_key)
            where: tuple[str | int, ...] = ("options", key)
            default = getattr(Options, key)
            raw = table.get(key, list(default) if isinstance(default, tuple) else default)
            if option.spec_kind == "flag":
                if not isinstance(raw, bool):
                    raise self.fail(where, "must be true or false")
                values[key] = raw
            elif option.spec_kind == "list":
                values[key] = tuple(self.strings(raw, where, empty_ok=True))
            else:
                values[key] = self.string(raw, where)
                if option.choices and values[key] not in option.choices:
                    raise self.fail(where, f"must be one of {', '.join(option.choices)}")
        for index, patch_id in enumerate(values["skip_patches"]):
            if unknown_ids([patch_id], every_patch_id()):
                raise self.fail(
                    ("options", "skip_patches", index),
                    f"unknown patch id {patch_id!r}: `mambawin patches --package "
                    "NAME` lists each package's",
                )
        values["abi"] = self.abi(values["abi"])
        if values["source_from"] not in SOURCES:
            choices = ", ".join(SOURCES)
            raise self.fail(("options", "source_from"), f"must be one of {choices}")
        return Options(**values)

    def abi(self, value: object) -> Abi:
        text = self.string(value, ("options", "abi"))
        try:
            return parse_abi(text)
        except UsageError:
            raise self.fail(("options", "abi"), f"must be one of {', '.join(ABIS)}") from None

    def ci(self, value: object) -> CiSpec:
        """[ci]: a Windows GPU runner's label (one label, as `runs-on` matches it) and its arch
        (one arch spelled like --arch, only beside the runner it describes)."""
        table = self.table(value, ("ci",))
        self.known(table, ("ci",), TABLE_KEYS["ci"])
        runner = self.optional_str(table, ("ci", "windows_gpu_runner"))
        if runner is not None and not RUNNER_LABEL.fullmatch(runner):
            raise self.fail(
                ("ci", "windows_gpu_runner"),
                f"{runner!r} is not one runner label (no spaces or commas): give the label your "
                "GPU runner registered with, e.g. gpu-windows",
            )
        other = not_windows(runner) if runner is not None else None
        if other is not None:
            raise self.fail(
                ("ci", "windows_gpu_runner"),
                f"{other}: give the label of a Windows runner with an NVIDIA GPU, e.g. gpu-windows",
            )
        arch_text = self.optional_str(table, ("ci", "windows_gpu_arch"))
        if arch_text is not None and runner is None:
            raise self.fail(
                ("ci", "windows_gpu_arch"),
                "names the GPU of windows_gpu_runner, which is not set: add windows_gpu_runner, "
                "or remove windows_gpu_arch",
            )
        return CiSpec(runner, None if arch_text is None else self.gpu_arch(arch_text))

    def gpu_arch(self, text: str) -> Arch:
        where: tuple[str | int, ...] = ("ci", "windows_gpu_arch")
        try:
            arch = parse_arch(text)
        except UsageError as exc:
            problem = str(exc).replace(" or 8.6+PTX", "").replace("--arch", "windows_gpu_arch")
            raise self.fail(where, problem) from None
        if arch.ptx or arch.suffix:
            raise self.fail(
                where, f'{text!r}: name the GPU\'s compute capability alone, e.g. "75" or "8.6"'
            )
        return arch

    # -- types --

    def known(
        self, table: Mapping[str, Any], where: tuple[str | int, ...], keys: Sequence[str]
    ) -> None:
        for key in table:
            if key not in keys:
                raise self.fail((*where, key), "unknown key: expected one of " + ", ".join(keys))

    def required(self, table: Mapping[str, Any], where: tuple[str | int, ...]) -> object:
        key = str(where[-1])
        if key not in table:
            raise self.fail(
                where,
                f"missing: the spec needs {dotted(where)} (`mambawin init` writes an example)",
            )
        return table[key]

    def table(self, value: object, where: tuple[str | int, ...]) -> dict[str, Any]:
        if not isinstance(value, dict):
            raise self.fail(where, f"must be a table ([{dotted(where)}]), got {_type_name(value)}")
        return value

    def tables(self, value: object, where: tuple[str | int, ...]) -> list[dict[str, Any]]:
        if not isinstance(value, list) or not value or not all(isinstance(v, dict) for v in value):
            raise self.fail(
                where, f"must be one or more [[{dotted(where)}]] tables, got {_type_name(value)}"
            )
        return value

    def string(self, value: object, where: tuple[str | int, ...]) -> str:
        if not isinstance(value, str) or not value.strip():
            raise self.fail(where, f"must be a non-empty string, got {_type_name(value)}")
        return self.data(value.strip(), where)

    def data(self, text: str, where: tuple[str | int, ...]) -> str:
        """Text that is data wherever it goes: no GitHub expression, no option to a program."""
        if EXPRESSION in text:
            raise self.fail(
                where,
                f"{text!r} holds a GitHub Actions expression ({EXPRESSION}): "
                "spec values are plain data; write the value itself",
            )
        if text.startswith("-"):
            raise self.fail(
                where,
                f"{text!r} starts with '-', which git and pip would read as "
                "an option: write the value itself",
            )
        odd = next((c for c in text if not c.isprintable()), None)
        if odd is not None:  # a line break, a tab, an ESC: they reached git, the matrix, a terminal
            raise self.fail(
                where, f"{text!r} holds {odd!r}: spec values are one line of printable text"
            )
        return text

    def ref(self, value: object, where: tuple[str | int, ...]) -> str:
        """A package's ref: what `--ref` accepts (fetch.git's one rule)."""
        text = self.string(value, where)
        try:
            git.check_ref(text, "ref")
        except UsageError as exc:
            raise self.fail(where, str(exc)) from None
        return text

    def repo(self, value: str | None, where: tuple[str | int, ...]) -> str | None:
        """A package's repo: what `--repo` accepts (no remote helper), with no credential."""
        if value is not None:
            try:
                git.check_url(value)
            except UsageError as exc:
                raise self.fail(where, str(exc)) from None
        return self.public(value, where)

    def public(self, url: str | None, where: tuple[str | int, ...]) -> str | None:
        """A URL the workflow and the index pages may carry: no credential in it
        (secret_urls)."""
        found = secret_in(url) if url is not None else None
        if found is not None:
            raise self.fail(
                where,
                f"holds a credential ({found}), and the spec's URLs are written into the "
                f"committed workflow: {WHERE_SECRETS_GO}",
            )
        return url

    def optional_str(self, table: Mapping[str, Any], where: tuple[str | int, ...]) -> str | None:
        key = str(where[-1])
        return self.string(table[key], where) if key in table else None

    def strings(
        self, value: object, where: tuple[str | int, ...], *, empty_ok: bool = False
    ) -> list[str]:
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise self.fail(where, f"must be a list of strings, got {_type_name(value)}")
        if not value and not empty_ok:
            raise self.fail(where, "must name at least one")
        return [self.data(v.strip(), (*where, i)) for i, v in enumerate(value)]

    def version(self, text: str, where: tuple[str | int, ...]) -> Version:
        try:
            return Version(text)
        except InvalidVersion:
            raise self.fail(where, f"{text!r} is not a version (PEP 440)") from None


# ---- where a key is ----------------------------------------------------------------------------


_HEADER = re.compile(r"^\s*\[(\[)?\s*([^\]]+?)\s*\]\]?")


_NAME = r"""(?:[A-Za-z0-9_-]+|"[^"]*"|'[^']*')"""


_KEY = re.compile(rf"^\s*({_NAME}(?:\s*\.\s*{_NAME})*)\s*=")


_DOT = re.compile(r"""\.(?=(?:[^"']*["'][^"']*["'])*[^"']*$)""")  # a dot outside quotes


def _key_lines(text: str) -> dict[tuple[str | int, ...], int]:
    """The first line of every table header and key, by its path: ('torch', 1, 'cuda') → 9."""
    found: dict[tuple[str | int, ...], int] = {}
    table: tuple[str | int, ...] = ()
    counts: dict[tuple[str, ...], int] = {}
    for number, line in enumerate(text.splitlines(), start=1):
        header = _HEADER.match(line)
        if header:
            names = tuple(_parts(header[2]))
            if header[1]:  # [[array]]: the n-th table of that name
                table = (*names, counts.get(names, 0))
                counts[names] = counts.get(names, 0) + 1
            else:
                table = names
            found.setdefault(table, number)
            continue
        key = _KEY.match(line)
        if key:
            found.setdefault((*table, *_parts(key[1])), number)
    return found


def _parts(dotted: str) -> list[str]:
    return [part.strip().strip("\"'") for part in _DOT.split(dotted)]


def _type_name(value: object) -> str:
    names: dict[type, str] = {
        bool: "a boolean",
        int: "an integer",
        float: "a number",
        str: "a string",
        list: "a list",
        dict: "a table",
    }
    return next((n for t, n in names.items() if isinstance(value, t)), type(value).__name__)
