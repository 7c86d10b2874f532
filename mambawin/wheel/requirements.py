"""Which requirements a wheel keeps, renames or leaves to an extra, decided by its platform tag.

One table, keyed by project, each rule with its reason. A rule applies only on its platform
family (the wheel's platform tag: `win_amd64` is windows, `linux_x86_64`/`manylinux*` linux); on
Linux upstream's set stays, minus what the user drops. `keep` exempts a project from the table.

What imports what (checked with `git grep` on v2.2.6, v2.3.2.post1 and main): `import mamba_ssm`
imports triton at package import on every v2.x tag; tilelang is imported only by
`ops/tilelang/mamba3` (Mamba3 MIMO), quack-kernels (`quack`) and nvidia-cutlass-dsl (`cutlass`)
only by `ops/cute/mamba3/mamba3_step_fn.py` (Mamba3 decode step), both behind a try/except in
`modules/mamba3.py`; apache-tvm-ffi is never imported by mamba_ssm itself (that step function
compiles with `--enable-tvm-ffi`, and tilelang uses it).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Literal

from packaging.markers import Marker
from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import Specifier, SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from mambawin.packages import pair_rule

Family = Literal["windows", "linux", "other"]
MAMBA3_EXTRA = "mamba3"


@dataclass(frozen=True)
class Rule:
    """One table entry: on `family` ("any": every platform) and for the upstream `versions`,
    `project` is renamed to `target`, moved to extra `target`, capped by specifier `target`, or,
    when the wheel lists neither `project` nor `target`, required as `target` (require)."""

    project: str  # canonical name of the requirement it matches
    family: Family | Literal["any"]
    action: Literal["rename", "extra", "cap", "require"]
    # new project name (rename, require), the extra's name (extra), a specifier (cap)
    target: str
    reason: str
    versions: str = ""  # upstream versions it applies to, a specifier; empty: all

    def applies(self, family: Family, version: Version | None) -> bool:
        if self.family not in (family, "any"):
            return False
        if not self.versions:
            return True
        return version is not None and version in SpecifierSet(self.versions)


@dataclass(frozen=True)
class Change:
    """One Requires-Dist value rewritten: `after` None means dropped."""

    before: str
    after: str | None
    reason: str

    def to_json(self) -> dict[str, str | None]:
        """{"from", "to", "reason"}: the provenance record's form."""
        return {"from": self.before, "to": self.after, "reason": self.reason}


@dataclass(frozen=True)
class Plan:
    """Every change for one wheel, and the extras the new requirements name."""

    changes: tuple[Change, ...]
    extras: tuple[str, ...]
    added: tuple[Change, ...] = ()  # requirements the wheel lacks (`before` is "")
    # Requires-Python and Classifier rewrites for the wheel's platform (`before` "": added)
    python: Change | None = None
    classifiers: tuple[Change, ...] = ()

    def replacements(self) -> dict[str, str | None]:
        """Original value -> new value (None: drop), for `metadata.edit_metadata`."""
        return {change.before: change.after for change in self.changes}

    @property
    def every(self) -> tuple[Change, ...]:
        """Every change, rewrites then additions (what the provenance and reports list)."""
        return (*self.changes, *self.added)

    def additions(self) -> list[str]:
        """New Requires-Dist values, after the wheel's own."""
        return [change.after for change in self.added if change.after]


_MAMBA3_ONLY = "only Mamba3 needs it ({what}); Mamba and Mamba2 import and run without it"
# The Mamba3-only set moves together: the extra cannot resolve on Windows anyway while
# tilelang==0.1.8 has no win_amd64 wheel, and a half-installed set is what breaks imports.
_TOGETHER = "; moved with the rest of the Mamba3-only set (win_amd64 wheels exist, unproven there)"

RULES: Mapping[str, tuple[Rule, ...]] = {
    "mamba-ssm": (
        Rule(
            "triton",
            "windows",
            "rename",
            "triton-windows",
            "triton publishes no Windows wheel; triton-windows provides the `triton` module that "
            "`import mamba_ssm` imports at package import (every v2.x tag)",
        ),
        Rule(
            "triton",
            "windows",
            "require",
            "triton-windows",
            "`import mamba_ssm` imports triton (ops/triton/layer_norm.py, unguarded) on every tag "
            "from v2.0.0, but v2.2.3 and v2.2.4 list no triton at all (setup.py comments it out), "
            "so their Windows wheels would install and then fail at import",
            versions=">=2.0.0",
        ),
        Rule(
            "tilelang",
            "windows",
            "extra",
            MAMBA3_EXTRA,
            "no win_amd64 wheel for upstream's pin tilelang==0.1.8 (0.1.10+ have one, but the "
            "kernels target 0.1.8); " + _MAMBA3_ONLY.format(what="the MIMO kernels"),
        ),
        Rule(
            "quack-kernels",
            "windows",
            "extra",
            MAMBA3_EXTRA,
            _MAMBA3_ONLY.format(what="the CuTe decode step") + _TOGETHER,
        ),
        Rule(
            "nvidia-cutlass-dsl",
            "windows",
            "extra",
            MAMBA3_EXTRA,
            _MAMBA3_ONLY.format(what="the CuTe decode step") + _TOGETHER,
        ),
        Rule(
            "apache-tvm-ffi",
            "windows",
            "extra",
            MAMBA3_EXTRA,
            "never imported by mamba_ssm; tilelang and the CuTe decode step use it; a mismatched "
            "install breaks `import mamba_ssm` with an AttributeError (state-spaces/mamba#986)",
        ),
        Rule(
            "transformers",
            "any",
            "cap",
            "<5",
            "utils/generation.py imports GreedySearchDecoderOnlyOutput, which transformers 5 "
            "removed, so `import mamba_ssm` fails with ImportError (upstream fixed it in PR #807, "
            "v2.3.0)",
            versions="<2.3.0",
        ),
    ),
    # causal-conv1d requires torch, packaging and ninja: all resolve on Windows.
    "causal-conv1d": (),
}


def platform_family(platform_tag: str) -> Family:
    """'windows' for win_*, 'linux' for linux_*/manylinux*/musllinux*, else 'other'."""
    first = platform_tag.split(".")[0]
    if first.startswith("win"):
        return "windows"
    if first.startswith(("linux", "manylinux", "musllinux")):
        return "linux"
    return "other"


def plan(
    project: str,
    platform_tag: str,
    requires: Sequence[str],
    *,
    version: str | None = None,
    drop: Iterable[str] = (),
    keep: Iterable[str] = (),
) -> Plan:
    """The changes the table (and the user's drop/keep) make to `requires` for this platform."""
    family = platform_family(platform_tag)
    kept: set[str] = {str(canonicalize_name(name)) for name in keep}
    dropped: set[str] = {str(canonicalize_name(name)) for name in drop} - kept
    release = _version(version)
    applicable = [
        rule
        for rule in (*RULES.get(canonicalize_name(project), ()), *_pair_rules(project, release))
        if rule.applies(family, release) and rule.project not in kept
    ]
    requires_rules = [rule for rule in applicable if rule.action == "require"]
    rules = {rule.project: rule for rule in applicable if rule.action != "require"}
    changes = [change for text in requires if (change := _change(text, rules, dropped)) is not None]
    reasons = {change.reason for change in changes}
    extras = sorted(
        {
            rule.target
            for rule in rules.values()
            if rule.action == "extra" and rule.reason in reasons
        }
    )
    listed = {name for text in requires if (name := _name(text))}
    added = tuple(
        Change("", rule.target, rule.reason)
        for rule in requires_rules
        if not {rule.project, rule.target} & (listed | dropped)
    )
    return Plan(tuple(changes), tuple(extras), added)


def with_minimum(plan: Plan, requires: Sequence[str], minimum: str, reason: str) -> Plan:
    """plan, with `minimum` (e.g. "torch>=2.10") imposed on the requirement it names.

    A listed requirement gets the minimum added to its specifier, one missing is added; one the
    plan already drops or rewrites on request (--drop) is left to that, and one that already
    implies the minimum is left alone (a second rewrite changes nothing).
    """
    wanted = Requirement(minimum)
    name = str(canonicalize_name(wanted.name))
    touched = {change.before for change in plan.changes}
    for text in requires:
        if _name(text) != name:
            continue
        if text in touched:
            return plan
        requirement = Requirement(text)
        if set(wanted.specifier) <= set(requirement.specifier):
            return plan
        requirement.specifier &= wanted.specifier
        return replace(plan, changes=(*plan.changes, Change(text, str(requirement), reason)))
    return replace(plan, added=(*plan.added, Change("", minimum, reason)))


def _name(text: str) -> str:
    try:
        return str(canonicalize_name(Requirement(text).name))
    except InvalidRequirement:
        return ""


def _change(text: str, rules: Mapping[str, Rule], dropped: set[str]) -> Change | None:
    try:
        requirement = Requirement(text)
    except InvalidRequirement:
        return None  # legacy spellings are left as they are (metadata.requirement_name drops them)
    name = canonicalize_name(requirement.name)
    if name in dropped:
        return Change(text, None, "dropped on request (--drop)")
    rule = rules.get(name)
    if rule is None:
        return None
    if rule.action == "rename":
        requirement.name = rule.target
        return Change(text, str(requirement), rule.reason)
    if rule.action == "cap":
        raised = raise_floor(requirement.specifier, SpecifierSet(rule.target))
        if raised == requirement.specifier:
            return None  # already capped (a second rewrite)
        requirement.specifier = raised
        return Change(text, str(requirement), rule.reason)
    if _extras_of(requirement.marker):
        return None  # already optional: an extra is not installed by default
    requirement.marker = _with_extra(requirement.marker, rule.target)
    return Change(text, str(requirement), rule.reason)


def _pair_rules(project: str, release: Version | None) -> tuple[Rule, ...]:
    """mamba-ssm's causal-conv1d extra raised to what the pair rule says serves the fast path:
    upstream's `causal-conv1d>=1.2.0` would install one below it (on Windows, an sdist to
    compile), and mamba then silently runs without the kernels."""
    if canonicalize_name(project) != "mamba-ssm" or release is None:
        return ()
    rule = pair_rule(release)
    if rule is None:
        return ()
    reason = (
        f"the causal-conv1d extra names what mamba-ssm {release.public} uses "
        f"(causal-conv1d{rule.causal_conv1d}: {rule.why}); an older one loses its fast path"
    )
    return (Rule("causal-conv1d", "windows", "cap", str(rule.causal_conv1d), reason),)


def raise_floor(specifier: SpecifierSet, floor: SpecifierSet) -> SpecifierSet:
    """specifier with floor's clauses, less its own lower bounds that floor's supersede
    (`>=1.2.0` and floor `>=1.4.0` give `>=1.4.0`; a higher own bound stays)."""
    lows = [Version(s.version) for s in floor if s.operator in (">=", ">")]
    low = max(lows) if lows else None

    def superseded(clause: Specifier) -> bool:
        if low is None or clause.operator not in (">=", ">"):
            return False
        try:
            return Version(clause.version) <= low
        except InvalidVersion:
            return False

    kept = [clause for clause in specifier if not superseded(clause)]
    if low is not None and any(
        c.operator in (">=", ">") and Version(c.version) > low for c in kept
    ):  # its own floor is higher already: only floor's other clauses are added
        floor = SpecifierSet(",".join(str(c) for c in floor if c.operator not in (">=", ">")))
    merged = SpecifierSet(",".join(str(c) for c in kept)) & floor
    return specifier if set(merged) == set(specifier) else merged


def _version(text: str | None) -> Version | None:
    try:
        return Version(text) if text else None
    except InvalidVersion:
        return None


def _extras_of(marker: Marker | None) -> bool:
    return marker is not None and "extra" in str(marker)


def _with_extra(marker: Marker | None, extra: str) -> Marker:
    if marker is None:
        return Marker(f'extra == "{extra}"')
    return Marker(f'({marker}) and extra == "{extra}"')
