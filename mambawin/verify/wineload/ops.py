"""The ops a stable wheel registers, as the load step asks torch's dispatcher for them.

Which ops: the ones the wheel's shim (`<extension>.py`) calls, `<...>.<op>.default`. Their
schemas: the ones mambawin's stable bindings declare (patch/causal_conv1d/stable_binding_cpp.py,
patch/mamba/stable_binding_source.py: the C++ text the stable-binding patches write, `m.def`),
the variant whose text the library holds (causal-conv1d's backward takes `bool deterministic`
from v1.6.0 on). From a schema the loader needs only one letter per argument (`kinds`).
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cache

from mambawin.errors import WheelError
from mambawin.patch.causal_conv1d.stable_binding_cpp import binding
from mambawin.patch.mamba.stable_binding_source import SOURCE

# A Tensor argument gets a CPU tensor (the dispatcher then looks for a CPU kernel, and lists
# where the op has kernels), an optional one None; bools, ints and floats their zero.
_KIND = {"Tensor": "T", "bool": "b", "int": "i", "SymInt": "i", "float": "f"}
_DEF = re.compile(r'm\.def\(((?:\s*"(?:[^"\\]|\\.)*")+)\s*\)')
_PIECE = re.compile(r'"((?:[^"\\]|\\.)*)"')
_ALIAS = re.compile(r"\([a-z]!?\)")


@dataclass(frozen=True)
class Op:
    """One op to ask for: `namespace::name`, its schema and the loader's argument letters."""

    namespace: str
    name: str
    schema: str

    @property
    def qualified(self) -> str:
        return f"{self.namespace}::{self.name}"

    @property
    def kinds(self) -> str:
        return argument_kinds(self.schema)

    @property
    def spec(self) -> str:
        """The loader's argument for this op: `ns::name|overload|kinds`."""
        return f"{self.qualified}||{self.kinds}"


def shim_ops(source: bytes, shim: str) -> tuple[str, ...]:
    """The op names the shim calls as `<...>.<op>.default` (sorted); parsed, never run."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError) as exc:
        raise WheelError(f"{shim} is not Python ({exc}): rebuild the wheel") from None
    except (RecursionError, MemoryError):  # `----…1` or `a.b.b…` nested deeper than Python parses
        msg = f"{shim} is nested too deeply to read (not a file mambawin writes): rebuild the wheel"
        raise WheelError(msg) from None
    names = {
        node.value.attr
        for node in ast.walk(tree)
        if isinstance(node, ast.Attribute)
        and node.attr == "default"
        and isinstance(node.value, ast.Attribute)
    }
    return tuple(sorted(names))


def argument_kinds(schema: str) -> str:
    """One letter per argument of `name(ARGS) -> RET`; WheelError for a type the loader cannot
    give (a list, a string)."""
    inside = schema[schema.index("(") + 1 : schema.rindex(") ->")]
    letters = []
    for argument in (a.strip() for a in inside.split(",") if a.strip()):
        kind = _ALIAS.sub("", argument.split()[0])
        if kind.endswith("?"):
            letters.append("N")
        elif kind in _KIND:
            letters.append(_KIND[kind])
        else:
            msg = f"{schema}: the loader cannot pass a {kind!r} argument ({argument})"
            raise WheelError(msg)
    return "".join(letters)


def declared_schemas(cpp: str) -> tuple[str, ...]:
    """Every `m.def("...")` schema in a binding's C++ text, adjacent literals joined."""
    return tuple("".join(_PIECE.findall(found)) for found in _DEF.findall(cpp))


@cache
def known_schemas() -> tuple[str, ...]:
    """Every schema mambawin's stable bindings declare, each variant."""
    texts = [binding("X", deterministic=flag) for flag in (False, True)] + [SOURCE]
    return tuple(dict.fromkeys(s for text in texts for s in declared_schemas(text)))


def ops_of(
    namespace: str, names: Iterable[str], library: bytes, schemas: Iterable[str]
) -> list[Op]:
    """Each named op with the schema the library holds (its text is a literal in the binary);
    WheelError naming an op whose schema mambawin does not know or the library does not hold."""
    known = tuple(schemas)
    ops = []
    for name in names:
        found = [s for s in known if s.startswith(f"{name}(") and s.encode() in library]
        if not found:
            msg = (
                f"the library holds no schema mambawin's stable binding declares for "
                f"{namespace}::{name}: rebuild the wheel with `mambawin build --abi stable`"
            )
            raise WheelError(msg)
        ops.append(Op(namespace, name, max(found, key=len)))
    return ops
