"""The one status vocabulary: a doctor check, a verify step and the views that draw them."""

from __future__ import annotations

import enum


class Status(str, enum.Enum):
    """How a check or a step came out."""

    OK = "ok"
    WARN = "warn"
    FAIL = "fail"
    SKIP = "skip"
