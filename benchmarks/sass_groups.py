"""Which archs can share one front-end pass: SASS kernel by kernel, per-arch build against grouped.

    python benchmarks/sass_groups.py units --per-arch OBJS --grouped 80:86,89=G80 \
        --grouped 86:89=G86 --package P --version V --abi A --cuda 13.0 \
        --platform linux_x86_64 --evidence "docs/benchmarks.md §26" [--write TABLE]
    python benchmarks/sass_groups.py compare --reference A --candidate B --arch sm_86 ...

Each side is built with one `-gencode arch=compute_XY,code=sm_XY` per arch (today's build) or
with `-gencode arch=compute_<p>,code=[sm_<p>,...]` (one cicc pass, ptxas per real arch).
`units` compares per compile unit: OBJS and each G<p> are folders of the build's objects
(`<unit>.o`, a split part `<unit>_partK.o` counting for its unit), each G<p> compiled with
`arch=compute_<p>,code=[sm_<p>,<archs>]`; a unit is proven for an arch when every kernel of
every one of its objects is identical, and the proof entries name the units (one entry per PTX
arch and set of archs); --write puts them into mambawin's proof table (replacing that package
release's earlier entries). `compare` compares two binaries at the archs named: an extension
module (.so/.pyd), an object, a wheel (its extension modules, matched by member name) or a folder
of wheels (matched by project), printing per binary and arch the kernels, how many are identical
and which differ (a whole binary names no units, so it proves nothing for the table). Needs
cuobjdump (PATH, CUDA_HOME, or `pip install nvidia-cuda-cuobjdump`). Measured: docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import tempfile
import zipfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from mambawin.errors import CommandError
from mambawin.wheel.gpucode import find_cuobjdump
from mambawin.wheel.sass import SassComparison, compare_sass, sass_of

_EXTENSION = re.compile(r"\.(so|pyd|o)$")


def binaries(path: Path, scratch: Path) -> dict[str, Path]:
    """{label: extension binary} of a binary, a wheel or a folder of wheels; a wheel's members are
    extracted under scratch. Labels match across the two sides: the member's name, prefixed by the
    project for a folder."""
    if path.is_dir():
        found: dict[str, Path] = {}
        for wheel in sorted(path.glob("*.whl")):
            project = wheel.name.split("-", 1)[0]
            for label, binary in binaries(wheel, scratch / project).items():
                found[f"{project}/{label}"] = binary
        return found
    if path.suffix == ".whl":
        out = scratch / path.stem
        found = {}
        with zipfile.ZipFile(path) as archive:
            for name in archive.namelist():
                if _EXTENSION.search(name) and "/" not in name.strip("/"):
                    archive.extract(name, out)
                    found[name] = out / name
        return found
    return {path.name if _EXTENSION.search(path.name) else "binary": path}


def compare_binaries(
    cuobjdump: str, reference: Path, candidate: Path, arch: str, *, same_internal_names: bool
) -> SassComparison:
    read = [
        sass_of(cuobjdump, side, arch, same_internal_names=same_internal_names)
        for side in (reference, candidate)
    ]
    return compare_sass(arch, read[0], read[1])


def compare_all(
    cuobjdump: str,
    reference: Path,
    candidate: Path,
    archs: list[str],
    *,
    same_internal_names: bool,
    scratch: Path,
) -> list[dict[str, Any]]:
    """Every binary the two sides share, at every arch: one row each."""
    left, right = binaries(reference, scratch / "reference"), binaries(candidate, scratch / "cand")
    if len(left) == 1 and len(right) == 1:  # two binaries named differently: compare them
        right = {next(iter(left)): next(iter(right.values()))}
    missing = sorted(left.keys() ^ right.keys())
    jobs = [(label, arch) for label in sorted(left.keys() & right.keys()) for arch in archs]

    def one(job: tuple[str, str]) -> dict[str, Any]:
        label, arch = job
        found = compare_binaries(
            cuobjdump, left[label], right[label], arch, same_internal_names=same_internal_names
        )
        return {"binary": label, **found.to_json()}

    with ThreadPoolExecutor(max_workers=4) as pool:
        rows = list(pool.map(one, jobs))
    rows += [{"binary": label, "missing_on_one_side": True, "same": False} for label in missing]
    return rows


_PART = re.compile(r"_part\d+$")


def unit_of(obj: Path) -> str:
    """The upstream unit an object belongs to: `x_part2.o` is x's (split-units only moves
    kernels between objects, tests/test_split_equivalence*.py)."""
    return _PART.sub("", obj.stem)


def _grouped_units(spec: str) -> tuple[str, tuple[str, ...], Path]:
    head, sep, path = spec.partition("=")
    ptx, colon, archs = head.partition(":")
    served = tuple(a.strip() for a in archs.split(",") if a.strip())
    if not sep or not colon or not ptx.isdigit() or not all(a.isdigit() for a in served):
        raise argparse.ArgumentTypeError(f"--grouped wants PTX:ARCH,ARCH=FOLDER: {spec!r}")
    return ptx, served, Path(path)


def units(args: argparse.Namespace, cuobjdump: str) -> dict[str, Any]:
    """Per (PTX arch, arch): each unit's kernels, and whether every one is identical."""
    per = {o.name: o for o in sorted(args.per_arch.glob("*.o"))}
    rows: list[dict[str, Any]] = []
    for ptx, served, folder in args.grouped:
        grouped = {o.name: o for o in sorted(folder.glob("*.o"))}
        jobs = [(name, arch) for name in sorted(per.keys() & grouped.keys()) for arch in served]

        def one(job: tuple[str, str], grouped: dict[str, Path] = grouped) -> dict[str, Any] | None:
            name, arch = job
            try:
                found = compare_binaries(
                    cuobjdump, per[name], grouped[name], f"sm_{arch}", same_internal_names=False
                )
            except CommandError as exc:
                if "does not contain device code" in str(exc):
                    return None  # a host unit (.cpp): no kernels to compare
                raise
            return {"object": name, "unit": unit_of(per[name]), **found.to_json()}

        with ThreadPoolExecutor(max_workers=args.jobs) as pool:
            rows += [{"ptx": ptx, **row} for row in pool.map(one, jobs) if row is not None]
        missing = sorted(per.keys() ^ grouped.keys())
        rows += [
            {"ptx": ptx, "object": m, "missing_on_one_side": True, "same": False} for m in missing
        ]
    verdicts: dict[tuple[str, str, str], dict[str, Any]] = {}
    for row in rows:
        if "unit" not in row:
            continue
        key = (row["ptx"], row["arch"].removeprefix("sm_"), row["unit"])
        seen = verdicts.setdefault(key, {"kernels": 0, "same": True, "differing": 0})
        seen["kernels"] += row["kernels"]
        seen["differing"] += len(row["differing"]) + len(row["only_candidate"])
        seen["same"] = seen["same"] and row["same"]
    table = [{"ptx": p, "arch": a, "unit": u, **v} for (p, a, u), v in sorted(verdicts.items())]
    report: dict[str, Any] = {"units": table, "objects": rows}
    if args.package:
        report["proofs"] = unit_proofs(args, table)
    return report


def unit_proofs(args: argparse.Namespace, table: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One entry per PTX arch and set of archs: the units proven for exactly those archs."""
    from mambawin.patch.arch_groups import proof_entry

    proven: dict[tuple[str, str], set[str]] = {}
    kernels: dict[tuple[str, str], int] = {}
    for row in table:
        key = (row["ptx"], row["unit"])
        proven.setdefault(key, set())
        if row["same"]:
            proven[key].add(row["arch"])
            kernels[key] = kernels.get(key, 0) + row["kernels"]
    by_archs: dict[tuple[str, tuple[str, ...]], list[str]] = {}
    for (ptx, unit), archs in proven.items():
        if archs:
            by_archs.setdefault((ptx, tuple(sorted(archs, key=int))), []).append(unit)
    return [
        proof_entry(
            package=args.package,
            version=args.version,
            abi=args.abi,
            cuda=args.cuda,
            platform=args.platform,
            ptx_arch=ptx,
            archs=[ptx, *archs],
            kernels=sum(kernels[(ptx, u)] for u in names),
            evidence=args.evidence,
            units=sorted(names),
        )
        for (ptx, archs), names in sorted(by_archs.items())
    ]


def write_table(path: Path, entries: list[dict[str, Any]]) -> None:
    """The proof table with this package release's entries replaced by these."""
    data = json.loads(path.read_text())
    if entries:
        first = entries[0]
        same = ("package", "version", "abi", "cuda", "platform")
        data["proofs"] = [
            e for e in data["proofs"] if any(e.get(k) != first[k] for k in same)
        ] + entries
        data["proofs"].sort(key=lambda e: json.dumps(e, sort_keys=True))
    path.write_text(json.dumps(data, indent=2) + "\n")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    u = sub.add_parser("units")
    u.add_argument("--per-arch", type=Path, required=True)
    u.add_argument("--grouped", type=_grouped_units, action="append", required=True)
    u.add_argument("--jobs", type=int, default=4)
    u.add_argument("--write", type=Path, help="the proof table to put the entries into")
    for name in ("package", "version", "abi", "cuda", "platform", "evidence"):
        u.add_argument(f"--{name}", default="")
    c = sub.add_parser("compare")
    c.add_argument("--reference", type=Path, required=True)
    c.add_argument("--candidate", type=Path, required=True)
    c.add_argument("--arch", action="append", required=True)
    c.add_argument("--same-internal-names", action="store_true")
    args = parser.parse_args(argv)
    cuobjdump = find_cuobjdump()
    if cuobjdump is None:
        print("cuobjdump not found: pip install nvidia-cuda-cuobjdump", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="sass-groups-") as scratch:
        if args.command == "units":
            report = units(args, cuobjdump)
            ok = bool(report["units"])
            if args.write and report.get("proofs"):
                write_table(args.write, report["proofs"])
        else:
            rows = compare_all(
                cuobjdump,
                args.reference,
                args.candidate,
                args.arch,
                same_internal_names=args.same_internal_names,
                scratch=Path(scratch),
            )
            report = {"rows": rows, "same": bool(rows) and all(r["same"] for r in rows)}
            ok = report["same"]
    print(json.dumps(report, indent=1))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
