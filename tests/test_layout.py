"""The package shows the pipeline, one folder per stage, and no module imports its own importers."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "mambawin"
ARCHITECTURE = PACKAGE.parent / "docs" / "architecture.md"
STAGES = ("toolchain", "doctor", "fetch", "patch", "builder", "wheel", "cross", "verify", "ui")


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imported(node: ast.AST, name: str, is_package: bool, modules: set[str]) -> set[str]:
    """mambawin modules one node imports, at every level, `if TYPE_CHECKING:` bodies included:
    a type-only import is still a dependency (and the sign of a cycle hidden from the runtime)."""
    found: set[str] = set()
    if isinstance(node, ast.Import):
        found = {alias.name for alias in node.names}
    elif isinstance(node, ast.ImportFrom):
        base = node.module or ""
        if node.level:
            anchor = name.split(".")[: len(name.split(".")) - node.level + is_package]
            base = ".".join([*anchor, *([base] if base else [])])
        # `from pkg import mod` imports pkg.mod when that is a module, else a name of pkg.
        found = {f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base for a in node.names}
    children = (_imported(n, name, is_package, modules) for n in ast.iter_child_nodes(node))
    return {m for m in found if m in modules}.union(*children)


def import_graph() -> dict[str, set[str]]:
    """Each mambawin module and the mambawin modules it imports anywhere in its body."""
    files = {module_name(p): p for p in PACKAGE.rglob("*.py")}
    modules = set(files)
    return {
        name: _imported(
            ast.parse(path.read_text(encoding="utf-8")), name, path.name == "__init__.py", modules
        )
        - {name}
        for name, path in files.items()
    }


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle as a path (first module repeated at the end), or None."""
    state: dict[str, int] = {}  # 1 = on the current path, 2 = done

    def visit(node: str, path: list[str]) -> list[str] | None:
        state[node] = 1
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return [*path[path.index(nxt) :], node, nxt] if nxt in path else [node, nxt]
            if nxt not in state and (cycle := visit(nxt, [*path, node])):
                return cycle
        state[node] = 2
        return None

    for start in sorted(graph):
        if start not in state and (cycle := visit(start, [])):
            return cycle
    return None


def test_the_package_has_no_import_cycle() -> None:
    cycle = find_cycle(import_graph())
    assert cycle is None, "import cycle: " + " -> ".join(cycle or ())


def test_the_cycle_finder_sees_a_cycle_through_a_function_level_import() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert find_cycle(graph) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None


def test_function_level_relative_and_type_checking_imports_are_all_edges() -> None:
    tree = ast.parse(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import mambawin.b\n"
        "def f():\n    from . import c\n    from mambawin.d import x\n"
    )
    modules = {"mambawin", "mambawin.a", "mambawin.b", "mambawin.c", "mambawin.d"}
    assert _imported(tree, "mambawin.a", False, modules) == {
        "mambawin.b",
        "mambawin.c",
        "mambawin.d",
    }


@pytest.mark.parametrize("stage", STAGES)
def test_each_pipeline_stage_is_a_package(stage: str) -> None:
    assert (PACKAGE / stage / "__init__.py").is_file(), f"mambawin/{stage}/ is not a package"


# Unanchored folder names in GitHub's standard Python .gitignore (and Black's/pytest's default
# excludes): a fork that adopts them would stop tracking, linting and testing such a folder.
IGNORED_BY_COMMON_RULES = {
    "build",
    "dist",
    "develop-eggs",
    "downloads",
    "eggs",
    ".eggs",
    "lib",
    "lib64",
    "parts",
    "sdist",
    "var",
    "wheels",
    "env",
    "venv",
    ".venv",
    "ENV",
    "htmlcov",
    "__pypackages__",
    "site",
}


def test_no_source_folder_has_a_name_common_ignore_rules_hide() -> None:
    hidden = sorted(
        str(p.relative_to(PACKAGE.parent))
        for p in PACKAGE.rglob("*")
        if p.is_dir() and p.name in IGNORED_BY_COMMON_RULES
    )
    assert hidden == [], f"rename these: {hidden}"


def verify_importers(graph: dict[str, set[str]]) -> list[str]:
    """Modules outside verify/, cli/ and ui/ that import from verify/ (each as `a -> b`)."""
    allowed = ("mambawin.verify", "mambawin.cli", "mambawin.ui")
    return sorted(
        f"{module} -> {target}"
        for module, targets in graph.items()
        if not any(module == a or module.startswith(a + ".") for a in allowed)
        for target in targets
        if target == "mambawin.verify" or target.startswith("mambawin.verify.")
    )


def test_only_verify_and_the_cli_and_its_views_import_from_verify() -> None:
    """Wheel facts (provenance, the stable-ABI audit) live in wheel/: builder, index and the
    guard read them there, never from the verification stage above them."""
    assert verify_importers(import_graph()) == []


def test_the_verify_rule_sees_a_stage_importing_verify() -> None:
    graph = {
        "mambawin.builder.metadata": {"mambawin.verify.abi_audit"},
        "mambawin.cli.verify": {"mambawin.verify.pipeline"},
        "mambawin.verify.static": {"mambawin.verify.report"},
    }
    assert verify_importers(graph) == ["mambawin.builder.metadata -> mambawin.verify.abi_audit"]


# ---- layer direction, in the order docs/architecture.md declares --------------------------------


def declared_layers(text: str) -> list[tuple[str, ...]]:
    """The numbered list under `## Layers`, top layer first: each item's backticked names, as
    modules (`cli/` is mambawin.cli, `errors.py` mambawin.errors, `__init__.py` mambawin)."""
    section = text.split("\n## Layers\n", 1)[1].split("\n## ", 1)[0]
    items = re.findall(r"^\d+\. (.*(?:\n {3,}\S.*)*)", section, re.MULTILINE)
    return [tuple(_module_of(name) for name in re.findall(r"`([^`]+)`", item)) for item in items]


def _module_of(name: str) -> str:
    if name == "__init__.py":
        return "mambawin"
    return "mambawin." + name.removesuffix("/").removesuffix(".py")


def layer_of(module: str, layers: list[tuple[str, ...]]) -> int:
    """The index of the layer holding module (a root module, or a module of a listed package)."""
    for number, members in enumerate(layers):
        if any(module == m or (module.startswith(m + ".") and m != "mambawin") for m in members):
            return number
    raise AssertionError(f"{module} is in no layer of docs/architecture.md's ## Layers")


def upward_imports(graph: dict[str, set[str]], layers: list[tuple[str, ...]]) -> list[str]:
    """Imports of a higher layer from a lower one (each as `a -> b`). One layer's members may
    import each other: a package's own modules, or the root modules."""
    return sorted(
        f"{module} -> {target}"
        for module, targets in graph.items()
        for target in targets
        if layer_of(target, layers) < layer_of(module, layers)
    )


def test_imports_point_down_the_layers_the_architecture_doc_declares() -> None:
    layers = declared_layers(ARCHITECTURE.read_text(encoding="utf-8"))
    assert upward_imports(import_graph(), layers) == []


def test_every_package_and_root_module_is_in_one_declared_layer() -> None:
    layers = declared_layers(ARCHITECTURE.read_text(encoding="utf-8"))
    declared = [m for layer in layers for m in layer]
    top = {module_name(p) for p in [*PACKAGE.glob("*.py"), *PACKAGE.glob("*/__init__.py")]}
    assert sorted(declared) == sorted(top), "## Layers must name each package and root module once"


def test_the_layer_rule_sees_an_import_up_the_layers() -> None:
    layers = declared_layers(
        "# doc\n\n## Layers\n\nText.\n\n1. `cli/`\n2. `builder/`, `x/`\n3. the root\n"
        "   modules: `__init__.py`, `errors.py`\n\n## Next\n\n1. `ignored/`\n"
    )
    assert layers == [
        ("mambawin.cli",),
        ("mambawin.builder", "mambawin.x"),
        ("mambawin", "mambawin.errors"),
    ]
    graph = {
        "mambawin.builder.pipeline": {"mambawin.errors", "mambawin.x.y", "mambawin.cli.app"},
        "mambawin.errors": {"mambawin"},
        "mambawin.cli.app": {"mambawin.builder.pipeline"},
    }
    assert upward_imports(graph, layers) == ["mambawin.builder.pipeline -> mambawin.cli.app"]
