"""The package shows the pipeline, one folder per stage, and no module imports its own importers."""

from __future__ import annotations

import ast
import json
import re
from dataclasses import dataclass
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


# ---- the layering file: parts, arrows, never-rules (docs/layers.json) ----------------------------

LAYERS = PACKAGE.parent / "docs" / "layers.json"


@dataclass(frozen=True)
class Never:
    """An arrow that must never be drawn, and the modules that still break it, each named."""

    source: str
    target: str
    why: str
    until_fixed: tuple[str, ...] = ()  # module paths allowed to break it until they are fixed


@dataclass(frozen=True)
class Layers:
    """docs/layers.json, read: parts top layer first (each with its paths under the repository),
    the arrows drawn, the never-rules, and the base part every part may import."""

    parts: tuple[tuple[str, tuple[str, ...], str], ...]  # name, paths, what it says
    arrows: frozenset[tuple[str, str]]
    never: tuple[Never, ...]
    base: str

    @property
    def names(self) -> list[str]:
        return [name for name, _, _ in self.parts]


def read_layers(text: str) -> Layers:
    data = json.loads(text)
    return Layers(
        parts=tuple((p["name"], tuple(p["is"]), p["says"]) for p in data["parts"]),
        arrows=frozenset((a, b) for a, b in data["arrows"]),
        never=tuple(
            Never(n["from"], n["to"], n["why"], tuple(n.get("until_fixed", ())))
            for n in data["never"]
        ),
        base=data["base"],
    )


def layers() -> Layers:
    return read_layers(LAYERS.read_text(encoding="utf-8"))


def module_path(module: str) -> str:
    """A module's file, as the layering file names paths (a package is its __init__.py)."""
    folder = module.replace(".", "/")
    package = PACKAGE.parent / folder / "__init__.py"
    return f"{folder}/__init__.py" if package.is_file() else f"{folder}.py"


def part_of(module: str, layout: Layers) -> str:
    """The part naming the longest path that holds module; AssertionError when none does."""
    path = module_path(module)
    holding = [
        (len(p), name)
        for name, paths, _ in layout.parts
        for p in paths
        if path == p or (p.endswith("/") and path.startswith(p))
    ]
    assert holding, f"{module} is in no part of docs/layers.json"
    return max(holding)[1]


def part_imports(
    graph: dict[str, set[str]], layout: Layers
) -> dict[tuple[str, str], list[tuple[str, str]]]:
    """Each arrow between two parts the imports draw, with the imports (module, target) that
    draw it."""
    found: dict[tuple[str, str], list[tuple[str, str]]] = {}
    for module, targets in sorted(graph.items()):
        source = part_of(module, layout)
        for target in sorted(targets):
            dest = part_of(target, layout)
            if dest != source:
                found.setdefault((source, dest), []).append((module, target))
    return found


def layering_problems(graph: dict[str, set[str]], layout: Layers) -> list[str]:
    """Every way the imports and the layering file disagree, one line each: a never-rule
    broken (outside its named modules), an arrow nobody drew, an arrow drawn that no import
    uses, a named exception that no longer breaks its rule, and the base part importing out."""
    drawn = part_imports(graph, layout)
    problems = []
    nevers = {(n.source, n.target): n for n in layout.never}
    for (source, target), imports in sorted(drawn.items()):
        rule = nevers.get((source, target))
        excused = set(rule.until_fixed) if rule else set()
        left = [(m, t) for m, t in imports if module_path(m) not in excused]
        where = ", ".join(f"{m} -> {t}" for m, t in left[:3])
        if rule and left:
            problems.append(f"never {source} -> {target} ({rule.why}): {where}")
        elif source == layout.base and left:
            problems.append(f"the base part {source} imports {target}: {where}")
        elif not rule and target != layout.base and (source, target) not in layout.arrows:
            problems.append(f"arrow nobody drew: {source} -> {target}: {where}")
    for source, target in sorted(layout.arrows - set(drawn)):
        problems.append(f"arrow drawn that no import uses: {source} -> {target}")
    for rule in layout.never:
        breaking = {module_path(m) for m, _ in drawn.get((rule.source, rule.target), [])}
        for path in sorted(set(rule.until_fixed) - breaking):
            problems.append(f"{path} no longer breaks {rule.source} -> {rule.target}: drop it")
    return problems


def file_problems(layout: Layers) -> list[str]:
    """What makes the file itself wrong: a path that does not exist, an arrow or rule naming no
    part, an arrow that is also a never-rule, an arrow that points up the part list."""
    names = layout.names
    problems = [
        f"{name} names {path}, which does not exist"
        for name, paths, _ in layout.parts
        for path in paths
        if not (PACKAGE.parent / path).exists()
    ]
    rules = {(n.source, n.target) for n in layout.never}
    for source, target in sorted(layout.arrows | rules):
        if source not in names or target not in names:
            problems.append(f"{source} -> {target} names a part the file does not list")
    problems += [f"{a} -> {b} is both drawn and never" for a, b in sorted(layout.arrows & rules)]
    problems += [
        f"{a} -> {b} points up the part list"
        for a, b in sorted(layout.arrows)
        if a in names and b in names and names.index(b) <= names.index(a)
    ]
    if layout.base != names[-1]:
        problems.append(f"the base part {layout.base} is not the last, lowest part")
    return problems


def test_the_layering_file_names_real_paths_and_draws_down_the_part_list() -> None:
    assert file_problems(layers()) == []


def test_every_module_is_in_one_part_of_the_layering_file() -> None:
    layout = layers()
    unplaced = []
    for module in import_graph():
        try:
            part_of(module, layout)
        except AssertionError:
            unplaced.append(module)
    assert unplaced == []


def test_the_imports_draw_exactly_the_layering_files_arrows_and_break_no_never_rule() -> None:
    assert layering_problems(import_graph(), layers()) == []


TOY = """{
  "base": "R",
  "parts": [
    {"name": "A", "is": ["mambawin/a/"], "says": "top"},
    {"name": "B", "is": ["mambawin/b/"], "says": "middle"},
    {"name": "C", "is": ["mambawin/b/c.py"], "says": "a file of b"},
    {"name": "R", "is": ["mambawin/r.py"], "says": "base"}
  ],
  "arrows": [["A", "B"]],
  "never": [
    {"from": "B", "to": "A", "why": "no upward import", "until_fixed": ["mambawin/b/old.py"]}
  ]
}"""


def test_the_layering_rules_see_a_never_arrow_an_undrawn_one_and_a_stale_one() -> None:
    layout = read_layers(TOY)
    assert part_of("mambawin.b.c", layout) == "C" and part_of("mambawin.b.x", layout) == "B"
    clean = {"mambawin.a.x": {"mambawin.b.x", "mambawin.r"}, "mambawin.b.old": {"mambawin.a.y"}}
    assert layering_problems(clean, layout) == []
    broken = {
        "mambawin.a.x": {"mambawin.r"},  # A -> B drawn, now unused
        "mambawin.b.new": {"mambawin.a.x"},  # breaks B -> A outside the named module
        "mambawin.b.c": {"mambawin.b.x"},  # C -> B: nobody drew it
        "mambawin.r": {"mambawin.b.x"},  # the base imports out
    }
    assert layering_problems(broken, layout) == [
        "never B -> A (no upward import): mambawin.b.new -> mambawin.a.x",
        "arrow nobody drew: C -> B: mambawin.b.c -> mambawin.b.x",
        "the base part R imports B: mambawin.r -> mambawin.b.x",
        "arrow drawn that no import uses: A -> B",
        "mambawin/b/old.py no longer breaks B -> A: drop it",
    ]


def test_the_file_check_sees_an_upward_arrow_and_a_drawn_never() -> None:
    layout = read_layers(TOY.replace('[["A", "B"]]', '[["A", "B"], ["B", "A"]]'))
    problems = file_problems(layout)
    assert "B -> A is both drawn and never" in problems
    assert "B -> A points up the part list" in problems


# ---- the layer list of docs/architecture.md is the layering file's ----------------------------


def layer_list(layout: Layers) -> list[str]:
    """docs/architecture.md's `## Layers` list as the layering file gives it, one item a part."""
    return [
        f"{number}. **{name}** ("
        + ", ".join(f"`{p.removeprefix('mambawin/')}`" for p in paths)
        + f"): {says}"
        for number, (name, paths, says) in enumerate(layout.parts, 1)
    ]


def declared_layers(text: str) -> list[tuple[str, ...]]:
    """The numbered list under `## Layers`, top layer first: each item's backticked names, as
    modules (`cli/` is mambawin.cli, `errors.py` mambawin.errors, `__init__.py` mambawin)."""
    section = text.split("\n## Layers\n", 1)[1].split("\n## ", 1)[0]
    items = re.findall(r"^\d+\. (.*(?:\n {3,}\S.*)*)", section, re.MULTILINE)
    return [tuple(_module_of(name) for name in re.findall(r"`([^`]+)`", item)) for item in items]


def _module_of(name: str) -> str:
    if name == "__init__.py":
        return "mambawin"
    return "mambawin." + name.removesuffix("/").removesuffix(".py").replace("/", ".")


def test_the_architecture_docs_layer_list_is_the_layering_files() -> None:
    section = ARCHITECTURE.read_text(encoding="utf-8").split("\n## Layers\n", 1)[1]
    listed = re.findall(r"^\d+\. .*$", section.split("\n## ", 1)[0], re.MULTILINE)
    assert listed == layer_list(layers()), "paste layer_list(layers()) into ## Layers"


def test_the_layer_list_parser_reads_each_items_paths() -> None:
    layers_found = declared_layers(
        "# doc\n\n## Layers\n\nText.\n\n1. **A** (`cli/`): x\n2. **B** (`builder/backends.py`, "
        "`x/`): y\n3. **R** (`__init__.py`, `errors.py`): z\n\n## Next\n\n1. `ignored/`\n"
    )
    assert layers_found == [
        ("mambawin.cli",),
        ("mambawin.builder.backends", "mambawin.x"),
        ("mambawin", "mambawin.errors"),
    ]


# ---- late (function-level) imports: what docs/architecture.md says they are for ----------------

# Modules that may be missing or belong to one platform: imported where used, so mambawin runs
# without them.
OPTIONAL_MODULES = frozenset(
    {
        "torch",
        "mamba_ssm",
        "causal_conv1d",
        "matplotlib",
        "git",
        "winreg",
        "_winapi",
        "pwd",
        "fcntl",
    }
)
# Late imports neither optional nor the CLI's, not hoisted yet: each goes from this list when
# its module-level import lands (the test fails on a stale entry as on a new one).
LATE_NOT_YET = {
    # the native backend's steps: builder.front and builder.results import this module's names
    "mambawin/builder/backends.py": {
        "mambawin.builder",
        "mambawin.builder.options",
        "mambawin.builder.pair",
        "mambawin.toolchain",
    },
    "mambawin/cli/team.py": {"dataclasses", "rich.markup"},
    "mambawin/cli/toolchain.py": {"os"},
    "mambawin/verify/packages.py": {"packaging.tags"},
    "mambawin/verify/resolve.py": {
        "concurrent.futures",
        "mambawin.wheel.info",
        "mambawin.wheel.metadata",
        "mambawin.wheel.provenance",
        "packaging.requirements",
        "packaging.tags",
        "packaging.version",
        "wheel.wheelfile",
    },
    "mambawin/verify/runners/environment.py": {"packaging.markers", "packaging.utils"},
    "mambawin/verify/steps.py": {"mambawin.verify.resolve"},
    "mambawin/verify/upstream_tests.py": {
        "mambawin.fetch",
        "mambawin.fetch.mirror",
        "mambawin.fetch.sdist",
        "mambawin.packages",
    },
}


def late_imports(tree: ast.AST, name: str, is_package: bool) -> set[str]:
    """The modules imported inside a function body (relative ones resolved against name)."""
    found: set[str] = set()
    for function in ast.walk(tree):
        if not isinstance(function, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        for node in ast.walk(function):
            if isinstance(node, ast.Import):
                found |= {alias.name for alias in node.names}
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    anchor = name.split(".")[: len(name.split(".")) - node.level + is_package]
                    base = ".".join([*anchor, *([base] if base else [])])
                found.add(base)
    return found


def unexplained_late_imports(sources: dict[str, str]) -> list[str]:
    """Late imports (sources: each file's repository path and text) that are neither of an
    optional module nor in a cli/ command module (which imports its stage only when the command
    runs), beside LATE_NOT_YET; and LATE_NOT_YET's stale entries."""
    problems = []
    for rel, text in sorted(sources.items()):
        name = module_name(PACKAGE.parent / rel)
        late = late_imports(ast.parse(text), name, rel.endswith("/__init__.py"))
        cli = rel.startswith("mambawin/cli/")
        odd = {
            m
            for m in late
            if m.split(".")[0] not in OPTIONAL_MODULES and not (cli and m.startswith("mambawin"))
        }
        listed = LATE_NOT_YET.get(rel, set())
        problems += [f"{rel}: late import of {m}" for m in sorted(odd - listed)]
        problems += [f"{rel}: {m} is imported late no more: drop it" for m in sorted(listed - odd)]
    return problems


def test_late_imports_are_for_optional_modules_or_the_cli() -> None:
    sources = {
        p.relative_to(PACKAGE.parent).as_posix(): p.read_text(encoding="utf-8")
        for p in PACKAGE.rglob("*.py")
    }
    assert unexplained_late_imports(sources) == []


def test_the_late_import_rule_sees_a_late_import_of_a_module_always_there() -> None:
    text = "import os\ndef f():\n    import torch\n    from . import b\n    import json\n"
    assert late_imports(ast.parse(text), "mambawin.x.a", False) == {"torch", "mambawin.x", "json"}
    assert unexplained_late_imports({"mambawin/x/a.py": text}) == [
        "mambawin/x/a.py: late import of json",
        "mambawin/x/a.py: late import of mambawin.x",
    ]
    cli = "def f():\n    from mambawin.builder import pipeline\n    import git\n"
    assert unexplained_late_imports({"mambawin/cli/x.py": cli}) == []
    assert unexplained_late_imports({"mambawin/verify/steps.py": "import os\n"}) == [
        "mambawin/verify/steps.py: mambawin.verify.resolve is imported late no more: drop it"
    ]


# ---- the rules docs/architecture.md says every module follows ----------------------------------

# Run as scripts inside a verify install environment (their output is their result), not imported.
SCRIPTS = (
    "mambawin/verify/runners/",
    # nvcc's per-unit wrappers, run by path in ninja's place: standard library only, each prints
    # its one error line and runs the real command itself.
    "mambawin/builder/nvcc_front.py",
    "mambawin/builder/job_gate.py",
)
FACES = ("mambawin/cli/", "mambawin/ui/", "mambawin/__main__.py")


def rule_breaks(sources: dict[str, str]) -> list[str]:
    """Core modules that import typer or call print, and modules other than proc.py that
    import subprocess (each as `path: what`)."""
    breaks = []
    for rel, text in sorted(sources.items()):
        core = not rel.startswith((*FACES, *SCRIPTS))
        for node in ast.walk(ast.parse(text)):
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and not node.level:
                names = [node.module or ""]
            tops = {name.split(".")[0] for name in names}
            if core and "typer" in tops:
                breaks.append(f"{rel}: imports typer")
            if "subprocess" in tops and rel not in ("mambawin/proc.py", *SCRIPTS[1:]):
                breaks.append(f"{rel}: imports subprocess")
            printer = isinstance(node, ast.Call) and ast.unparse(node.func) == "print"
            if core and printer:
                breaks.append(f"{rel}: calls print")
    return breaks


def test_core_modules_never_import_typer_or_print_and_only_proc_runs_programs() -> None:
    sources = {
        p.relative_to(PACKAGE.parent).as_posix(): p.read_text(encoding="utf-8")
        for p in PACKAGE.rglob("*.py")
    }
    assert rule_breaks(sources) == []


def test_the_rule_check_sees_typer_print_and_subprocess_in_a_core_module() -> None:
    text = "import subprocess\nfrom typer import Option\ndef f():\n    print('x')\n"
    assert rule_breaks({"mambawin/builder/x.py": text}) == [
        "mambawin/builder/x.py: imports subprocess",
        "mambawin/builder/x.py: imports typer",
        "mambawin/builder/x.py: calls print",
    ]
    assert rule_breaks({"mambawin/cli/x.py": text}) == ["mambawin/cli/x.py: imports subprocess"]
    assert rule_breaks({"mambawin/proc.py": "import subprocess\n"}) == []
