"""What the last syncs found that the person should look at, kept for `engrama_status`.

A sync that held back archiving (too many notes missing at once), conflict copies a sync tool left beside
notes, and notes that are only cloud placeholders are not errors, but each asks something of the person. The
sync keeps them in the graph's meta table (one JSON value), so every process on the vault — the lease holder,
a follower, `engrama-vault status` — reports the same thing. Whole-vault passes replace it; a pass over one
folder replaces what lies in that folder; the watcher adds and drops conflict copies as they come and go.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import Any, Protocol

from vault_sync.report import WAITING_FOR_HOLDER, ConflictCopy, SyncReport

ATTENTION_KEY = "sync_attention"
MAX_LISTED = 20  # entries per list kept and shown: status is read in every conversation, keep it short
MAX_KEPT = 1_000  # notes that cannot be synced kept (MAX_LISTED shown), so each can be taken off when fixed


class MetaPort(Protocol):
    async def get_meta(self, key: str) -> str | None: ...

    async def set_meta(self, key: str, value: str) -> None: ...


@dataclass(frozen=True)
class Attention:
    archive_held_back: int = 0
    archive_hint: str | None = None
    conflict_copies: tuple[ConflictCopy, ...] = ()
    conflict_count: int = 0  # all of them, when more than MAX_LISTED were found
    not_downloaded: tuple[str, ...] = ()
    not_downloaded_count: int = 0
    # Notes the sync could not read as notes, with why (broken frontmatter, too large, not UTF-8): the graph
    # holds what they said when last read, and search only the text they hold now (review 21a).
    # All of them (up to MAX_KEPT), so that one fixed is taken off whether or not it was shown (review 21e).
    unsynced: tuple[tuple[str, str], ...] = ()

    @classmethod
    def from_json(cls, text: str | None) -> Attention:
        try:
            raw = json.loads(text) if text else {}
        except ValueError:
            return cls()
        copies = tuple(ConflictCopy(str(c[0]), str(c[1])) for c in raw.get("conflict_copies", ()))
        return cls(
            archive_held_back=int(raw.get("archive_held_back", 0)),
            archive_hint=raw.get("archive_hint"),
            conflict_copies=copies,
            conflict_count=int(raw.get("conflict_count", len(copies))),
            not_downloaded=tuple(raw.get("not_downloaded", ())),
            not_downloaded_count=int(raw.get("not_downloaded_count", 0)),
            unsynced=tuple((str(u[0]), str(u[1])) for u in raw.get("unsynced", ())),
        )

    def to_json(self) -> str:
        data: dict[str, Any] = {
            "archive_held_back": self.archive_held_back,
            "archive_hint": self.archive_hint,
            "conflict_copies": [[c.path, c.copy_of] for c in self.conflict_copies],
            "conflict_count": self.conflict_count,
            "not_downloaded": list(self.not_downloaded),
            "not_downloaded_count": self.not_downloaded_count,
            "unsynced": [list(u) for u in self.unsynced],
        }
        return json.dumps(data, sort_keys=True)

    def after_pass(self, folder: str, report: SyncReport) -> Attention:
        """This record updated with what a (non-dry) pass over `folder` ("" = the whole vault) found."""
        kept_copies = [c for c in self.conflict_copies if not _under(folder, c.path)]
        kept_placeholders = [p for p in self.not_downloaded if not _under(folder, p)]
        copies = sorted({*kept_copies, *report.conflict_copies}, key=lambda c: c.path)
        placeholders = sorted({*kept_placeholders, *report.not_downloaded})
        held_back, hint = report.archive_held_back, report.archive_hint
        if folder and not held_back:  # a clean pass over one folder says nothing about the rest of the vault
            held_back, hint = self.archive_held_back, self.archive_hint
        failed = {e.path: e.error for e in report.errors if e.error != WAITING_FOR_HOLDER}
        kept = {path: why for path, why in self.unsynced if not _under(folder, path)}
        unsynced = sorted({**kept, **failed}.items())
        return Attention(
            archive_held_back=held_back,
            archive_hint=hint,
            conflict_copies=tuple(copies[:MAX_LISTED]),
            conflict_count=len(copies) if folder == "" else max(len(copies), self.conflict_count),
            not_downloaded=tuple(placeholders[:MAX_LISTED]),
            not_downloaded_count=len(placeholders),
            unsynced=tuple(unsynced[:MAX_KEPT]),
        )

    def with_outcomes(self, outcomes: Iterable[tuple[str, str | None]]) -> Attention:
        """This record after notes were reconciled one by one (the watcher's changes): (path, why it could not
        be read as a note, or None when it was)."""
        listed = dict(self.unsynced)
        for path, why in outcomes:
            if why is not None and why != WAITING_FOR_HOLDER:
                listed[path] = why
            else:
                listed.pop(path, None)
        return replace(self, unsynced=tuple(sorted(listed.items())[:MAX_KEPT]))

    def with_conflict_copy(self, copy: ConflictCopy, present: bool) -> Attention:
        """This record with one conflict copy added (it appeared) or dropped (it was merged or deleted)."""
        others = [c for c in self.conflict_copies if c.path != copy.path]
        copies = sorted([*others, copy] if present else others, key=lambda c: c.path)
        listed_before = any(c.path == copy.path for c in self.conflict_copies)
        count = self.conflict_count + (present and not listed_before) - (not present and listed_before)
        return replace(
            self, conflict_copies=tuple(copies[:MAX_LISTED]), conflict_count=max(count, len(copies))
        )

    def as_status(self) -> dict[str, Any]:
        """The `attention` object of `engrama_status`'s vault section; empty when nothing needs the person."""
        status: dict[str, Any] = {}
        if self.archive_held_back:
            status["archive_held_back"] = self.archive_held_back
            status["archive_hint"] = self.archive_hint
        if self.conflict_copies:
            status["conflict_copies"] = [
                {"path": c.path, "what_to_do": conflict_advice(c)} for c in self.conflict_copies
            ]
            if self.conflict_count > len(self.conflict_copies):
                status["conflict_copies_total"] = self.conflict_count
        if self.not_downloaded_count:
            status["not_downloaded"] = self.not_downloaded_count
            status["not_downloaded_examples"] = list(self.not_downloaded[:3])
        if self.unsynced:
            status["not_synced"] = [{"path": path, "why": why} for path, why in self.unsynced[:MAX_LISTED]]
            if len(self.unsynced) > MAX_LISTED:
                status["not_synced_total"] = len(self.unsynced)
        return status


async def load_attention(graph: MetaPort) -> Attention:
    """The record as last saved (by any process on this database)."""
    return Attention.from_json(await graph.get_meta(ATTENTION_KEY))


async def save_attention(graph: MetaPort, before: Attention, after: Attention) -> None:
    """Save `after` when it differs from `before` (the record it was computed from)."""
    if after != before:
        await graph.set_meta(ATTENTION_KEY, after.to_json())


def conflict_advice(copy: ConflictCopy) -> str:
    """What the person should do about one conflict copy."""
    return (
        f"conflict copy of {copy.copy_of} made by a sync tool: merge it into {copy.copy_of} in Obsidian, then "
        "delete it (engrama does not sync it as a note of its own)"
    )


def _under(folder: str, rel: str) -> bool:
    return folder == "" or rel == folder or rel.startswith(folder + "/")
