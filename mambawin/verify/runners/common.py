"""What every GPU-side runner shares: the dtypes it covers, and how it hands back its report (one
JSON line on stdout, what `verify.sandbox.run_module` reads; a per-dtype summary on stderr for a
person)."""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping
from typing import Any

DTYPES = ("float32", "float16", "bfloat16")


def emit(report: Mapping[str, Any], json_output: bool) -> None:
    """Print the per-dtype rows on stderr, and the report as one JSON line with --json."""
    for dtype, row in report.get("per_dtype", {}).items():
        print(f"{dtype}: {row}", file=sys.stderr)
    if json_output:
        # Python's json writes inf as Infinity; the reader is verify (Python too).
        print(json.dumps(report, default=str))
