"""Content checksums: how the sync tells a change from a touch, and our own writes from the person's."""

from __future__ import annotations

import hashlib


def sha256_hex(data: bytes) -> str:
    """The sha256 of `data` as 64 lowercase hex digits (the `checksum` of a `FileState`)."""
    return hashlib.sha256(data).hexdigest()
