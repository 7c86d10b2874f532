"""The wall of a whole `mambawin verify` (upstream's tests included), per step, for comparing two
mambawin checkouts (a baseline commit's and today's) on one GPU machine.

    python benchmarks/verify_wall.py run --label base --mambawin BASE_CHECKOUT --work DIR \
        WHEELHOUSE -- --skip requirements
    python benchmarks/verify_wall.py run --label new --mambawin . --work DIR WHEELHOUSE \
        -- --skip requirements
    python benchmarks/verify_wall.py run --label new-warm --mambawin . --work DIR \
        --caches DIR/new-caches --warm WHEELHOUSE -- --skip requirements
    python benchmarks/verify_wall.py compare DIR/base.json DIR/new.json

`run` runs `python -m mambawin verify WHEELHOUSE --upstream-tests --json EXTRA...` with the
checkout on PYTHONPATH, in cache folders of its own (DIR/LABEL-caches unless --caches: mambawin's
cache, Triton's and inductor's; a fresh run refuses a folder that is already there, --warm reuses
it: the second verify of the same wheels). Upstream's tests are read from mambawin's cached
mirrors (or sdists): on a machine with no network, `--cache C` runs in the mambawin cache C that
holds them, and a cold run first moves C/kernel-caches aside (to kernel-caches.before-LABEL, never
deleted). It writes DIR/LABEL.json: the wall, the verify's exit
code, and per step its status, seconds and case count (smoke's and conv's cases, calls' probes,
blocks' blocks, compile's rows, ops' packages; upstream-tests per package: passed, failed,
skipped, errors, expected failures), with the report's profile when it has one. stderr goes to
DIR/LABEL.log.

`compare A B` prints B's wall and each step's seconds over A's, and checks that both covered the
same: the same steps passed, each with the same case count, upstream's counts equal. It exits 1
when they did not.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

# Where each runner's report lists what it checked (the step's cases).
CASE_KEYS = ("cases", "probes", "blocks", "rows", "packages")
UPSTREAM_COUNTS = ("passed", "failed", "skipped", "errors", "expected_failures")


def case_count(step: Mapping[str, Any]) -> int | None:
    """How many cases a step's details list, None when it lists none."""
    details = step.get("details") or {}
    for key in CASE_KEYS:
        if isinstance(details.get(key), list):
            return len(details[key])
    return None


def upstream_counts(step: Mapping[str, Any]) -> dict[str, dict[str, int]]:
    """upstream-tests' counts per package."""
    details = step.get("details") or {}
    return {
        project: {k: int(run.get(k, 0)) for k in UPSTREAM_COUNTS}
        for project, run in sorted(details.items())
        if isinstance(run, Mapping)
    }


def summarize(label: str, document: Mapping[str, Any], wall: float, code: int) -> dict[str, Any]:
    """LABEL.json: the wall and each step's status, seconds and cases."""
    steps = []
    for step in document.get("steps", []):
        entry: dict[str, Any] = {
            "name": step["name"],
            "status": step["status"],
            "seconds": step.get("seconds"),
            "cases": case_count(step),
        }
        if step["name"] == "upstream-tests":
            entry["upstream"] = upstream_counts(step)
        steps.append(entry)
    return {
        "label": label,
        "wall_s": round(wall, 2),
        "exit_code": code,
        "passed": document.get("passed"),
        "steps": steps,
        "profile": document.get("profile"),
    }


def run(args: argparse.Namespace) -> dict[str, Any]:
    work = Path(args.work).resolve()
    caches = Path(args.caches).resolve() if args.caches else work / f"{args.label}-caches"
    if caches.exists() and not args.warm:
        sys.exit(f"{caches} already holds caches: pass --warm to reuse them, or another --label")
    cache = Path(args.cache).resolve() if args.cache else caches / "mambawin"
    if args.cache and not args.warm:
        set_aside(cache, args.label)
    folders = {
        "MAMBAWIN_CACHE_DIR": cache,
        # the baseline keeps no kernel caches of its own: these stand for Triton's and
        # inductor's defaults, emptied (fresh) or reused (--warm) the same way
        "TRITON_CACHE_DIR": caches / "triton",
        "TORCHINDUCTOR_CACHE_DIR": caches / "inductor",
    }
    for folder in folders.values():
        folder.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, **{k: str(v) for k, v in folders.items()}}
    env["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(Path(args.mambawin).resolve()), os.environ.get("PYTHONPATH")) if p
    )
    extra = [a for a in args.extra if a != "--"]
    argv = [args.python, "-m", "mambawin", "verify", args.wheelhouse, "--upstream-tests", "--json"]
    log = work / f"{args.label}.log"
    began = time.monotonic()
    with log.open("w", encoding="utf-8") as stderr:
        done = subprocess.run(
            [*argv, *extra], env=env, stdout=subprocess.PIPE, stderr=stderr, text=True, check=False
        )
    wall = time.monotonic() - began
    try:
        document = json.loads(done.stdout)
    except ValueError:
        sys.exit(f"verify printed no JSON (exit {done.returncode}): see {log}")
    result = summarize(args.label, document, wall, done.returncode)
    (work / f"{args.label}.json").write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    return result


def set_aside(cache: Path, label: str) -> None:
    """A cold run in a given mambawin cache (one that holds the upstream mirrors a machine with
    no network needs): the kernel caches an earlier verify left there are moved aside, never
    deleted, to kernel-caches.before-LABEL."""
    kept = cache / "kernel-caches"
    if not kept.exists():
        return
    aside = cache / f"kernel-caches.before-{label}"
    if aside.exists():
        sys.exit(f"{aside} is already there: move it away, or pass another --label")
    kept.rename(aside)


def compare(first: Mapping[str, Any], second: Mapping[str, Any]) -> dict[str, Any]:
    """second over first: the wall, each step's seconds; and whether both covered the same."""
    a = {s["name"]: s for s in first["steps"]}
    b = {s["name"]: s for s in second["steps"]}
    problems = []
    for name in sorted(set(a) | set(b)):
        if name not in a or name not in b:
            problems.append(f"{name}: only in {first['label'] if name in a else second['label']}")
            continue
        left, right = a[name], b[name]
        if left["status"] != right["status"]:
            problems.append(f"{name}: {left['status']} then {right['status']}")
        if left.get("cases") != right.get("cases"):
            problems.append(f"{name}: {left.get('cases')} cases then {right.get('cases')}")
        if left.get("upstream") != right.get("upstream"):
            problems.append(f"{name}: counts {left.get('upstream')} then {right.get('upstream')}")
    steps = {
        name: _ratio(a[name].get("seconds"), b[name].get("seconds")) for name in a if name in b
    }
    return {
        "first": first["label"],
        "second": second["label"],
        "wall_s": [first["wall_s"], second["wall_s"]],
        "wall_ratio": _ratio(first["wall_s"], second["wall_s"]),
        "step_ratio": steps,
        "same_coverage": not problems,
        "problems": problems,
    }


def _ratio(first: float | None, second: float | None) -> float | None:
    return round(second / first, 3) if first and second is not None else None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    one = sub.add_parser("run", help="one verify, timed; writes WORK/LABEL.json")
    one.add_argument("--label", required=True)
    one.add_argument("--mambawin", required=True, help="the mambawin checkout to run")
    one.add_argument("--work", required=True, help="where LABEL.json, .log and caches go")
    one.add_argument("--caches", help="the run's cache folder (default WORK/LABEL-caches)")
    one.add_argument(
        "--cache",
        help="mambawin's cache to run in (one holding the upstream mirrors, on a machine with no "
        "network); a cold run moves its kernel-caches aside (default: fresh, in --caches)",
    )
    one.add_argument("--warm", action="store_true", help="reuse --caches as an earlier run left it")
    one.add_argument("--python", default=sys.executable)
    one.add_argument("wheelhouse")
    one.add_argument("extra", nargs=argparse.REMAINDER, help="after --: more verify arguments")
    two = sub.add_parser("compare", help="B over A, and whether both covered the same")
    two.add_argument("first")
    two.add_argument("second")
    args = parser.parse_args(argv)
    if args.command == "run":
        Path(args.work).mkdir(parents=True, exist_ok=True)
        print(json.dumps(run(args), indent=2))
        return 0
    first, second = (
        json.loads(Path(p).read_text(encoding="utf-8")) for p in (args.first, args.second)
    )
    result = compare(first, second)
    print(json.dumps(result, indent=2))
    return 0 if result["same_coverage"] else 1


if __name__ == "__main__":
    sys.exit(main())
