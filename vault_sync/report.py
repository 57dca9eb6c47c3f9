"""The shape of a reconcile: what happened to one note, and to a whole vault."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

# What happened to one note file.
CREATED, UPDATED, UNCHANGED, ARCHIVED, IGNORED, FAILED = (
    "created",
    "updated",
    "unchanged",
    "archived",
    "ignored",
    "failed",
)


# The error of a note a process without the vault's lease cannot index yet (it owes an id only the holder
# may write): not the note's fault, so not listed for the person (`attention`).
WAITING_FOR_HOLDER = "waiting for the process that holds the vault lease"


@dataclass(frozen=True)
class NoteOutcome:
    path: str
    action: str  # one of the constants above
    id: str | None = None
    inject_id: bool = False  # an engrama_id line was (or, in a dry run, would be) inserted
    moved_from: str | None = None
    error: str | None = None
    id_owed: bool = (
        False  # indexed, but its engrama_id line waits until the note is quiet (blank or just changed)
    )
    id_not_written: str | None = None  # indexed, but its engrama_id line cannot be written: why


@dataclass(frozen=True)
class SyncError:
    path: str
    error: str


@dataclass(frozen=True)
class ConflictCopy:
    """A sync tool's conflict copy beside a note: not synced as a note of its own; the person merges it."""

    path: str
    copy_of: str  # the note it is a conflict copy of (which may be gone)


@dataclass
class SyncReport:
    """Counts of a vault reconcile (a builder: filled in while the sync runs, then handed out)."""

    scanned: int = 0
    created: int = 0
    updated: int = 0
    unchanged: int = 0
    archived: int = 0
    moved: int = 0
    ids_injected: list[str] = field(default_factory=list)
    ids_owed: list[str] = field(default_factory=list)  # indexed; the id line follows once each note is quiet
    # Indexed, but no engrama_id line can be written into them (read-only, or a frontmatter layout such as
    # JSON that cannot take a line): their identity is kept in the database only, so a rebuild gives them new
    # ids. Each with why.
    ids_not_written: list[SyncError] = field(default_factory=list)
    errors: list[SyncError] = field(default_factory=list)
    # A partial view of the vault never archives what it cannot see (vault_sync.reconcile, vault_sync.scan):
    archive_held_back: int = 0  # notes missing from the vault, not archived because so many went at once
    archive_hint: str | None = None  # why they were held back and how to confirm
    conflict_copies: list[ConflictCopy] = field(default_factory=list)
    not_downloaded: list[str] = field(default_factory=list)  # notes only a cloud placeholder stands for
    moved_from: list[str] = field(default_factory=list)  # the paths the moved notes left (not in as_dict)

    def add(self, outcome: NoteOutcome) -> None:
        if outcome.action == FAILED:
            self.errors.append(SyncError(outcome.path, outcome.error or "unknown error"))
        elif outcome.action in (CREATED, UPDATED, UNCHANGED, ARCHIVED):
            setattr(self, outcome.action, getattr(self, outcome.action) + 1)
        if outcome.inject_id:
            self.ids_injected.append(outcome.path)
        if outcome.id_owed:
            self.ids_owed.append(outcome.path)
        if outcome.id_not_written:
            self.ids_not_written.append(SyncError(outcome.path, outcome.id_not_written))
        if outcome.moved_from:
            self.moved += 1
            self.moved_from.append(outcome.moved_from)

    def as_dict(self) -> dict[str, Any]:
        data = asdict(self)
        del data["moved_from"]
        return data
