"""Several verify runners in one Python: torch is imported and CUDA started once, then each
runner's own `report(argv)` is called in turn.

`python -m mambawin.verify.runners.worker --plan JSON` where JSON is a list of
`{"name": "smoke", "args": [...]}`. Each line it prints for the parent
(`verify.workers`) starts with MARK and holds one JSON object, flushed at once:

- `{"setup": {"seconds", "torch", "cuda"}}` once, after `import torch` and CUDA's start;
- `{"start": KEY}` before a runner runs (so a crash names the runner that was running);
- `{"step": KEY, "seconds", "report_file"}` when it returned (with --results DIR: the report is
  in a file of DIR; without, `"report"` holds it), `{"step", "seconds", "error"}` when it
  raised (that runner's failure, not the worker's).

KEY is the job's `"key"` (a step's part: `blocks[Mamba2-bfloat16]`), else its name.

What the runners print on stdout goes to stderr, so only MARK lines carry results.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import importlib
import json
import re
import sys
import time
import traceback
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, TextIO

MARK = "@mambawin-worker "
_SAFE = re.compile(r"[^A-Za-z0-9_.-]")  # a key as a file name: `blocks[Mamba-float16]`
# The runners a worker may run: each module has `report(argv) -> dict`.
RUNNERS = ("ops", "smoke", "conv", "calls", "blocks", "compile", "bench")


def setup() -> dict[str, Any]:
    """Import torch and start CUDA (when there is a GPU): the cost every runner shared."""
    import torch

    cuda = torch.cuda.is_available()
    if cuda:
        torch.zeros(1, device="cuda")  # CUDA starts and its context is made on first use
    return {"torch": torch.__version__, "cuda": torch.version.cuda if cuda else None}


def release() -> None:
    """What one runner left goes before the next starts, as if each had a process of its own:
    its GPU memory (the next one's peak is its own) and torch.compile's compiled frames (a
    runner that compiles upstream's functions again meets no recompile limit of another's)."""
    gc.collect()
    dynamo = sys.modules.get("torch._dynamo")
    if dynamo is not None:
        dynamo.reset()
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_available():
        torch.cuda.empty_cache()


def run_plan(
    plan: Sequence[Mapping[str, Any]],
    send: Callable[[dict[str, Any]], None],
    *,
    load: Callable[[str], Callable[[Sequence[str]], dict[str, Any]]],
    prepare: Callable[[], dict[str, Any]] = setup,
    clean: Callable[[], None] = release,
) -> None:
    """Set up once, then run each runner of the plan in order, sending each result."""
    began = time.monotonic()
    facts = prepare()
    send({"setup": {"seconds": round(time.monotonic() - began, 3), **facts}})
    for job in plan:
        name = str(job["name"])
        key = str(job.get("key") or name)
        send({"start": key})
        began = time.monotonic()
        try:
            with contextlib.redirect_stdout(sys.stderr):
                report = load(name)([str(a) for a in job.get("args", [])])
        except SystemExit as exc:  # argparse refused the arguments
            result: dict[str, Any] = {"error": f"{name} refused its arguments (exit {exc.code})"}
        except Exception as exc:  # a runner's own failure; the others still run
            last = traceback.format_exception_only(type(exc), exc)[-1].strip()
            result = {"error": f"{name} raised {last}"}
        else:
            result = {"report": report}
        seconds = round(time.monotonic() - began, 3)
        send({"step": key, "seconds": seconds, **result})
        clean()


def load_runner(name: str) -> Callable[[Sequence[str]], dict[str, Any]]:
    if name not in RUNNERS:
        raise ValueError(f"no runner {name!r}: choose from {', '.join(RUNNERS)}")
    module = importlib.import_module(f"mambawin.verify.runners.{name}")
    runner: Callable[[Sequence[str]], dict[str, Any]] = module.report
    return runner


def sender(stream: TextIO, results: Path | None = None) -> Callable[[dict[str, Any]], None]:
    """Each message as one MARK line; with results, a report goes to results/NAME.json and the
    line names the file: a short line is written to the pipe whole, where a report of 70 KB could
    be cut by what an extension or a compile worker prints at the same time."""

    def send(message: dict[str, Any]) -> None:
        if results is not None and "report" in message:
            path = results / f"{_SAFE.sub('_', str(message['step']))}.json"
            # default=str as the runners' own JSON; Python's json writes inf as Infinity (read
            # back by Python)
            path.write_text(json.dumps(message.pop("report"), default=str), encoding="utf-8")
            message["report_file"] = str(path)
        stream.write(MARK + json.dumps(message, default=str) + "\n")
        stream.flush()

    return send


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--plan", required=True, help="the runners to run, as a JSON list")
    parser.add_argument("--results", type=Path, help="write each report to DIR/NAME.json")
    parser.add_argument("--json", action="store_true", help="accepted: the output is JSON lines")
    args = parser.parse_args(argv)
    plan = json.loads(args.plan)
    run_plan(plan, sender(sys.stdout, args.results), load=load_runner)
    return 0


if __name__ == "__main__":
    sys.exit(main())
