"""Timestamps as the store writes them: ISO 8601, UTC, second precision, with a `Z`."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

FORMAT = "%Y-%m-%dT%H:%M:%SZ"


def utc_now() -> str:
    return datetime.now(UTC).strftime(FORMAT)


def utc_ago(seconds: float) -> str:
    """The time `seconds` ago, as the store writes times."""
    return (datetime.now(UTC) - timedelta(seconds=seconds)).strftime(FORMAT)
