"""Timestamps as the store writes them: ISO 8601, UTC, second precision, with a `Z`."""

from __future__ import annotations

from datetime import UTC, datetime


def utc_now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
