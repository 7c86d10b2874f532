"""`mambawin build` builds mamba-ssm with a causal-conv1d that fits (`--with none`: alone).

The pair is checked before anything is built: both versions are read from the upstream mirrors
(no checkout), and a causal-conv1d that the mamba-ssm version cannot use is refused with one line
naming the rule (packages.PAIR_RULES). Without `--with causal-conv1d==REF` the newest
causal-conv1d release that fits is chosen. Both build into the same --out, compiled at once in one
job pool (pooled.build_together); --plan plans them one after the other.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any, TypeVar

from packaging.version import Version

from mambawin.builder.estimate import Estimate, expected
from mambawin.builder.options import BuildOptions
from mambawin.builder.pipeline import check_inputs
from mambawin.builder.results import BuildPlan
from mambawin.errors import UpstreamError, UsageError
from mambawin.fetch import origin, upstream, version_rules
from mambawin.packages import (
    CAUSAL_CONV1D,
    MAMBA,
    Package,
    get_package,
    pair_problem,
    pair_rule,
)
from mambawin.patch.registry import check_ids, every_patch_id, own_ids
from mambawin.stage import Reporter

T = TypeVar("T")


@dataclass(frozen=True)
class Companion:
    """The second package of `--with NAME[==REF]`, and where it comes from (--with-repo)."""

    ref: str | None = None  # None: the newest release that fits the mamba-ssm version
    repo: str | None = None  # None: causal-conv1d's upstream


@dataclass(frozen=True)
class PairChoice:
    """The two versions decided before building, and the causal-conv1d ref to build."""

    mamba_version: Version
    conv_ref: str
    conv_version: Version


def parse_with(spec: str, repo: str | None = None) -> Companion:
    """`causal-conv1d` or `causal-conv1d==REF` (REF: a tag, branch or commit, like --ref, or a
    version in any spelling: v1.4.0, 1.4.0, 1.4)."""
    name, sep, ref = spec.partition("==")
    package = get_package(name)
    if package != CAUSAL_CONV1D or (sep and not ref.strip()):
        msg = (
            f"--with {spec!r}: only causal-conv1d can be built with mamba-ssm; write "
            "--with causal-conv1d or --with causal-conv1d==v1.6.1.post4"
        )
        raise UsageError(msg)
    if _RANGE.search(ref):  # `==1.4.*`, `===1.4`: a range or pip's arbitrary equality
        msg = (
            f"--with {spec!r}: ==REF names one release, tag, branch or commit, not a range; "
            "write e.g. --with causal-conv1d==v1.4.0, or leave ==REF out for the newest that fits"
        )
        raise UsageError(msg)
    return Companion(ref.strip() or None, repo)


NONE = "none"  # `--with none`: mamba-ssm alone


def companion_of(package: Package, spec: str | None, repo: str | None) -> Companion | None:
    """What `build` builds next to package: by default mamba-ssm gets the newest causal-conv1d
    that fits (its fast path needs it) and causal-conv1d nothing; `--with none` builds the package
    alone; `--with causal-conv1d[==REF]` names the companion."""
    if spec is not None and spec.strip().lower() == NONE:
        if repo is not None:
            msg = "--with-repo names where causal-conv1d comes from: drop it, or drop --with none"
            raise UsageError(msg)
        return None
    if spec is None:
        if package != MAMBA:
            if repo is not None:
                msg = "--with-repo names the causal-conv1d built next to mamba-ssm: drop it"
                raise UsageError(msg)
            return None
        return Companion(None, repo)
    return parse_with(spec, repo)


# Characters of a version range, never of a release name: git refuses `*` in a ref too.
_RANGE = re.compile(r"[*<>=~,]|^!")


def check_fits(mamba_version: Version, conv_version: Version) -> None:
    """The one pair check of an explicit causal-conv1d, whichever way its version was spelled;
    UsageError naming the rule."""
    problem = pair_problem(mamba_version, conv_version)
    if problem:
        msg = (
            f"causal-conv1d {conv_version} does not fit mamba-ssm {mamba_version}: "
            f"{problem.why}; use causal-conv1d{problem.needed} (or leave out ==REF for the "
            "newest that fits)"
        )
        raise UsageError(msg)


def release_ref(ref: str, version: Version, tags: list[str]) -> str:
    """The release tag a version spelling names (`1.4` -> `v1.4.0`): ref itself when it is a
    tag, else the release tag of an equal version, else ref as given (a branch of that name)."""
    if ref in tags:
        return ref
    equal = [tag for tag in tags if version_rules.release_version(tag) == version]
    return equal[0] if equal else ref


def choose_pair(options: BuildOptions, companion: Companion) -> PairChoice:
    """The mamba-ssm version and a causal-conv1d ref that fits it; UsageError for a bad pair."""
    if options.package != MAMBA:
        msg = "--with builds causal-conv1d next to mamba-ssm: drop --package or drop --with"
        raise UsageError(msg)
    mamba_version = _mamba_version(options)
    if companion.ref is not None:
        ref = companion.ref
        spelled = version_rules.spelled_version(ref)
        if spelled is not None:  # checked as spelled before causal-conv1d's source is read
            check_fits(mamba_version, spelled)
            refs = origin.release_refs(companion.repo, CAUSAL_CONV1D, options.source_from)
            ref = release_ref(ref, spelled, refs)
        conv_version = origin.version_of(companion.repo, ref, CAUSAL_CONV1D, options.source_from)
        check_fits(mamba_version, conv_version)  # what the tree says, when it differs
        return PairChoice(mamba_version, ref, conv_version)
    conv_ref = newest_fitting(
        origin.release_refs(companion.repo, CAUSAL_CONV1D, options.source_from), mamba_version
    )
    version = version_rules.release_version(conv_ref) or Version("0")
    return PairChoice(mamba_version, conv_ref, version)


def newest_fitting(tags: list[str], mamba_version: Version) -> str:
    """The newest causal-conv1d release tag the mamba-ssm version can use."""
    rule = pair_rule(mamba_version)
    fitting = [
        (version, tag)
        for tag in tags
        if (version := version_rules.release_version(tag)) is not None
        and (rule is None or rule.causal_conv1d.contains(version, prereleases=True))
    ]
    if not fitting:
        wanted = f"causal-conv1d{rule.causal_conv1d}" if rule else "a causal-conv1d release"
        msg = (
            f"no causal-conv1d release fits mamba-ssm {mamba_version} (needs {wanted}): "
            "pass --with causal-conv1d==REF or --with-repo with a newer mirror"
        )
        raise UpstreamError(msg)
    return max(fitting)[1]


def companion_options(
    options: BuildOptions, companion: Companion, choice: PairChoice
) -> BuildOptions:
    """The causal-conv1d build: the same archs, jobs, --out and labels as mamba-ssm's."""
    return replace(
        options,
        package=CAUSAL_CONV1D,
        repo=companion.repo,
        ref=choice.conv_ref,
        source=None,
        keep_complex=False,
        skip_patches=own_ids(options.skip_patches, CAUSAL_CONV1D),
        pin=None,  # a pin names mamba-ssm's own source
    )


def split_skips(options: BuildOptions) -> BuildOptions:
    """mamba-ssm's build options with only its own --skip-patch ids; an id neither package
    knows is a usage error."""
    known = sorted(every_patch_id())
    check_ids(options.skip_patches, known, flag="--skip-patch", owner="mamba-ssm or causal-conv1d")
    return replace(options, skip_patches=own_ids(options.skip_patches, MAMBA))


def pair_options(
    options: BuildOptions, companion: Companion, *, reporter: Reporter
) -> list[BuildOptions]:
    """Check the pair; the build options of mamba-ssm, then of the causal-conv1d that fits."""
    own = split_skips(options)  # before any fetch: a wrong id is a usage error at once
    check_inputs(own)  # and every other input mamba-ssm's build would refuse
    choice = choose_pair(options, companion)
    reporter.note(
        f"pair: mamba-ssm {choice.mamba_version} + causal-conv1d {choice.conv_version} "
        f"({choice.conv_ref})"
    )
    return [own, companion_options(options, companion, choice)]


def run_pair(
    options: BuildOptions,
    companion: Companion,
    run: Callable[[BuildOptions, Reporter], T],
    *,
    reporter: Reporter,
) -> list[T]:
    """Check the pair, then run `run` (pipeline.plan) for mamba-ssm, then for causal-conv1d."""
    return [run(one, reporter) for one in pair_options(options, companion, reporter=reporter)]


def pair_json(results: list[Any]) -> dict[str, Any]:
    """The `build --with --json` form: one entry per package, mamba-ssm first; a plan adds the
    pair's expected time (both compile at once, in one pool)."""
    data: dict[str, Any] = {"builds": [result.to_json() for result in results]}
    if all(isinstance(r, BuildPlan) for r in results):
        data["estimate"] = pair_estimate(results).to_json()
    return data


def pair_estimate(plans: list[BuildPlan]) -> Estimate:
    """The pair's expected wall time: both packages in one pool of jobs (builder/estimate.py)."""
    packages = [(get_package(p.package), False) for p in plans]
    archs = max(len(p.archs.split(";")) for p in plans)
    passes = [float((p.estimate or {}).get("arch_passes", archs)) for p in plans]
    return expected(packages, archs, min(p.jobs for p in plans), passes=passes)


def pair_time(plans: list[Any]) -> str:
    """The note a pair's plan ends with: the expected time of both at once."""
    estimate = pair_estimate(plans)
    return (
        f"the pair compiles at once: about {estimate.seconds:.0f} s with {estimate.jobs} jobs "
        f"on {estimate.cores} cores"
    )


def _mamba_version(options: BuildOptions) -> Version:
    if options.source is not None:
        return Version(upstream.describe(options.source, MAMBA).version)
    refs = origin.release_refs(options.repo, MAMBA, options.source_from)
    ref = options.ref or version_rules.newest_release(refs, options.upstream_repo)
    return origin.version_of(options.repo, ref, MAMBA, options.source_from)
