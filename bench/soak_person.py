"""The soak's person: edits notes the way Obsidian, editors and sync clients save them.

Every line the person writes carries a counter (`s<seed>-p<n>`), so its survival can be checked; the person
re-reads a note before each edit (Obsidian reloads a file changed on disk) and notes, on that re-read, any of
its lines that vanished and any change of the note's `engrama_id`. Each note is followed by a key across its
renames, moves, trips to `.trash` and back, so its identity is tracked by its history, not by its path.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import re
from dataclasses import dataclass, field
from pathlib import Path

from bench.soak_record import SoakRecord

FOLDERS = ["", "Notes", "Projects", "Concepts", "Technologies", "Archive"]
NAMES = [
    "Atlas",
    "Borealis",
    "Cedar",
    "Delta",
    "Ember",
    "Fjord",
    "Granite",
    "Harbor",
    "Iris",
    "Juniper",
    "Kestrel",
    "Lumen",
    "Meridian",
    "Nimbus",
    "Orchid",
    "Pylon",
    "Quartz",
    "Raven",
    "Sierra",
    "Tundra",
]
ID_LINE = re.compile(r"^engrama_id:[ \t]*(\S+)[ \t]*\r?$", re.MULTILINE)
REV_LINE = re.compile(r"^soak_rev: .*\n", re.MULTILINE)
TRASH = ".trash"


@dataclass
class Note:
    """One note as the person knows it: where it is now, which of its lines they expect, which ids it had."""

    key: str
    path: str  # vault-relative; in .trash while trashed
    origin: str  # "person" (they created it) or "tool" (found in the vault, made by an assistant)
    lines: list[str] = field(default_factory=list)  # the person's lines it must still hold
    lost: list[str] = field(default_factory=list)  # lines found missing on a re-read
    ids: list[str] = field(default_factory=list)  # distinct engrama_ids seen on it, in order
    state: str = "live"  # live, trashed or deleted
    keeps_decisions: bool = False  # an insight's note or the dismissed list: the person never deletes these
    home: str = ""  # where a trashed note is restored to
    ops: list[int] = field(default_factory=list)  # log numbers of the operations on it
    paths: list[tuple[float, str]] = field(default_factory=list)  # (seconds into the run, path) from then on
    gaps: list[tuple[float, float, str]] = field(
        default_factory=list
    )  # in-place saves: truncated, written, path

    def path_at(self, t: float) -> str:
        """Where the note was `t` seconds into the run."""
        found = self.paths[0][1] if self.paths else self.path
        for since, path in self.paths:
            if since <= t:
                found = path
        return found

    @property
    def name(self) -> str:
        return Path(self.path).stem


def note_id(text: str) -> list[str]:
    return ID_LINE.findall(text)


def frontmatter_end(text: str) -> int:
    """Index just past the closing `---` line of a leading frontmatter block, or 0 when there is none."""
    if not text.startswith("---\n"):
        return 0
    close = text.find("\n---\n", 3)
    if close >= 0:
        return close + 5
    return len(text) if text.endswith("\n---") else 0


def with_line(text: str, line: str) -> str:
    return text + ("" if not text or text.endswith("\n") else "\n") + line + "\n"


def with_property(text: str, line: str) -> str:
    """Set the `soak_rev:` property (one line) in the frontmatter, adding a block when there is none."""
    end = frontmatter_end(text)
    if not end:
        return f"---\n{line}\n---\n{text}"
    head, body = text[:end], text[end:]
    head = REV_LINE.sub("", head)
    closing = head.rfind("---")
    return head[:closing] + line + "\n" + head[closing:] + body


class Person:
    """The person and their model of the vault; two hands may edit at once, never the same note."""

    def __init__(self, vault: Path, seed: int, record: SoakRecord) -> None:
        self.vault = vault
        self.seed = seed
        self.record = record
        self.notes: dict[str, Note] = {}
        self.counter = 0
        self.busy: set[str] = set()
        self.reserved: set[str] = set()  # titles being created right now

    # --- the model -----------------------------------------------------------------------------------

    def line(self, words: str = "") -> str:
        self.counter += 1
        return f"{words or 'Line'} s{self.seed}-p{self.counter:05d}"

    def live(self) -> list[Note]:
        return [n for n in self.notes.values() if n.state == "live"]

    def live_names(self) -> list[str]:
        return [n.name for n in self.live()]

    def _new_key(self, path: str, origin: str) -> Note:
        note = Note(key=f"N{len(self.notes) + 1:04d}", path=path, origin=origin)
        note.paths.append((self.record.now(), path))
        self.notes[note.key] = note
        return note

    def _taken(self, title: str) -> bool:
        folded = title.casefold()
        if folded in {t.casefold() for t in self.reserved}:
            return True
        return any(p.stem.casefold() == folded for p in self._disk_notes())

    def fresh_title(self, rng: random.Random) -> str:
        for _ in range(40):
            title = rng.choice(NAMES)
            if rng.random() < 0.3 or self._taken(title):
                title = f"{title} {rng.randint(2, 99)}"
            if not self._taken(title):
                return title
        return f"Note s{self.seed}-{self.counter}-{rng.randint(1000, 9999)}"

    def _disk_notes(self) -> list[Path]:
        found = []
        for folder, dirs, files in os.walk(self.vault):
            dirs[:] = [d for d in dirs if not d.startswith(".")]
            found += [Path(folder) / f for f in files if f.endswith(".md") and not f.startswith(".")]
        return found

    def adopt_unknown_notes(self) -> None:
        """Notes the assistants created show up in Obsidian's file list; the person may edit them too."""
        known = {n.path for n in self.notes.values() if n.state == "live"}
        for path in self._disk_notes():
            rel = path.relative_to(self.vault).as_posix()
            if rel in known or rel.startswith("Untitled") or Path(rel).stem.startswith("Untitled"):
                continue
            if self._moved_by_servers(path):
                continue
            note = self._new_key(rel, "tool")
            text = self._read(note)
            if text is not None:
                note.ids += note_id(text)[:1]
                note.keeps_decisions = "insight_key:" in text or path.stem == "Dismissed insights"
                self.record.event("person", "found", key=note.key, path=rel, ids=note.ids)

    def _moved_by_servers(self, path: Path) -> bool:
        """A note the person knows, brought back from the trash (or moved) by a server: follow it there."""
        try:
            ids = note_id(path.read_text(encoding="utf-8", errors="replace"))
        except FileNotFoundError:
            return True
        for note in self.notes.values():
            gone = (
                note.state in ("live", "trashed") and note.key not in self.busy and self._read(note) is None
            )
            if ids and ids[0] in note.ids and gone:
                self.reread(note, 0)
                return True
        return False

    def _read(self, note: Note) -> str | None:
        try:
            return (self.vault / note.path).read_text(encoding="utf-8", errors="replace")
        except FileNotFoundError:
            return None

    def reread(self, note: Note, seq: int) -> str | None:
        """Read the note as Obsidian reloads it, and notice lost lines and a changed id."""
        text = self._read(note)
        if text is None:
            text = self._relocate(note, seq)
        if text is None:
            self.record.find(
                "notes stay where the person put them", f"{note.key} {note.path} vanished (op {seq})"
            )
            note.state = "deleted"
            note.lost += note.lines
            note.lines = []
            return None
        ids = note_id(text)
        if len(ids) > 1:
            self.record.find(
                "one engrama_id per note", f"{note.key} {note.path} has {len(ids)} ids (op {seq})"
            )
        if ids and note.ids and ids[0] != note.ids[-1]:
            self.record.find(
                "no id changed on a note that still exists",
                f"{note.key} {note.path}: {note.ids[-1]} -> {ids[0]} (op {seq}; ops on it {note.ops[-6:]})",
            )
        if ids and ids[0] not in note.ids:
            note.ids.append(ids[0])
        present = set(text.splitlines())
        missing = [line for line in note.lines if line not in present]
        if missing:
            self.record.find(
                "every line the person wrote is in the vault",
                f"{note.key} {note.path} lost {missing[:3]} (op {seq}; ops on it {note.ops[-6:]})",
            )
            note.lost += missing
            note.lines = [line for line in note.lines if line in present]
        return text

    def _relocate(self, note: Note, seq: int) -> str | None:
        """Find a note that is not where the person left it (an assistant's write may restore a trashed note),
        by its id or its first line; the person goes on editing it there (Obsidian shows it there)."""
        trash = self.vault / TRASH
        places = self._disk_notes() + (sorted(trash.glob("*.md")) if trash.is_dir() else [])
        for place in places:
            text = place.read_text(encoding="utf-8", errors="replace")
            by_id = bool(note.ids) and note.ids[-1] in note_id(text)
            if not by_id and not (note.lines and note.lines[0] in text.splitlines()):
                continue
            rel = place.relative_to(self.vault).as_posix()
            for other in self.notes.values():  # already found there as a note of its own: one note, one key
                if other is not note and other.path == rel and other.state in ("live", "trashed"):
                    note.lines += other.lines
                    note.ids += [i for i in other.ids if i not in note.ids]
                    other.state, other.lines = "merged", []
            self.record.event("person", "relocated", key=note.key, was=note.path, now=rel, of=seq)
            moved = self.record.stats.setdefault("notes the servers moved", [])
            moved.append(f"{note.key} {note.path} -> {rel} (op {seq})")
            note.path, note.state = rel, "trashed" if rel.startswith(f"{TRASH}/") else "live"
            note.paths.append((self.record.now(), rel))
            return text
        return None

    def catch_up(self) -> None:
        """Before the final checks: look for every note that is not where the person last saw it."""
        for note in list(self.notes.values()):
            if note.state in ("live", "trashed") and self._read(note) is None:
                self.reread(note, 0)

    # --- one operation -------------------------------------------------------------------------------

    async def act(self, rng: random.Random) -> None:
        live = [n for n in self.live() if n.key not in self.busy]
        trashed = [n for n in self.notes.values() if n.state == "trashed" and n.key not in self.busy]
        if len(self.record.person_ops) == 0 or rng.random() < 0.05:
            self.adopt_unknown_notes()
        population = len(self.live())
        weights = {
            "new_obsidian": 1.4 if population < 60 else 0.1,
            "new_atomic": 0.6 if population < 60 else 0.1,
            "edit_atomic": 1.5,
            "edit_in_place": 1.5,
            "edit_vim": 1.0,
            "append": 1.0,
            "property": 1.0,
            "remove_line": 0.4,
            "move": 0.8,
            "rename": 0.6,
            "trash": 0.35 if population > 8 else 0.0,
            "restore": 0.5 if trashed else 0.0,
            "delete": 0.3 if population > 8 else 0.0,
        }
        if population < 8:
            weights["new_obsidian"] = weights["new_atomic"] = 4.0
        kind = rng.choices(list(weights), list(weights.values()))[0]
        if kind.startswith("new_"):
            await (self.new_obsidian(rng) if kind == "new_obsidian" else self.new_atomic(rng))
            return
        pool = trashed if kind == "restore" else live
        if kind in ("trash", "delete"):  # deleting an insight's record would rightly lose its decision
            pool = [n for n in pool if not n.keeps_decisions]
        if kind in ("move", "rename"):  # the dismissed list is read at its own path only
            pool = [n for n in pool if n.name != "Dismissed insights"]
        if not pool:
            return
        note = rng.choice(pool)
        self.busy.add(note.key)
        try:
            await getattr(self, kind)(note, rng)
        except OSError as error:  # the file moved under the person's feet (an assistant wrote beside it)
            self.record.event("person", "os-error", key=note.key, kind=kind, error=str(error))
        finally:
            self.busy.discard(note.key)

    def _start(self, kind: str, note: Note, **details: object) -> int:
        seq = self.record.person_op(kind, key=note.key, path=note.path, **details)
        note.ops.append(seq)
        return seq

    async def new_obsidian(self, rng: random.Random) -> None:
        """Obsidian's new note: an empty `Untitled.md`, renamed when the title is typed, then filled."""
        folder = rng.choice(FOLDERS)
        (self.vault / folder).mkdir(exist_ok=True)
        untitled = next(
            f"{folder}/{stem}.md".lstrip("/")
            for stem in ["Untitled", *(f"Untitled {i}" for i in range(1, 50))]
            if not (self.vault / folder / f"{stem}.md").exists()
        )
        title = self.fresh_title(rng)
        self.reserved.add(title)
        note = self._new_key(untitled, "person")
        self.busy.add(note.key)
        try:
            (self.vault / untitled).write_bytes(b"")
            seq = self._start("new_obsidian", note, title=title)
            await asyncio.sleep(rng.uniform(0.2, 1.5))
            target = f"{folder}/{title}.md".lstrip("/")
            if (self.vault / target).exists():
                target = f"{folder}/{title} {note.key}.md".lstrip("/")
            os.rename(self.vault / untitled, self.vault / target)
            note.path = target
            note.paths.append((self.record.now(), target))
            self.record.event("person", "typed-title", key=note.key, path=target, of=seq)
            await asyncio.sleep(rng.uniform(0.1, 1.0))
            for _ in range(rng.randint(1, 3)):  # typing: Obsidian saves in place every couple of seconds
                text = self.reread(note, seq)
                if text is None:
                    return
                line = self.line(f"Typed into [[{rng.choice(NAMES)}]]")
                note.ops.append(
                    self.record.event("person", "typing", key=note.key, path=note.path, line=line)
                )
                await self._in_place(note, with_line(text, line), rng.random() < 0.3, rng)
                note.lines.append(line)
                await asyncio.sleep(rng.uniform(0.1, 0.8))
        finally:
            self.reserved.discard(title)
            self.busy.discard(note.key)

    async def new_atomic(self, rng: random.Random) -> None:
        """A note that arrives whole: a template, a sync client, another device."""
        folder = rng.choice(FOLDERS)
        (self.vault / folder).mkdir(exist_ok=True)
        title = self.fresh_title(rng)
        note = self._new_key(f"{folder}/{title}.md".lstrip("/"), "person")
        self._start("new_atomic", note)
        body = [self.line(f"About [[{rng.choice(NAMES)}]]"), self.line("Second thought")]
        head = [f"tags: [soak, {rng.choice(['a', 'b'])}]", f"soak_rev: {self.line('rev')}"]
        text = ("---\n" + "\n".join(head) + "\n---\n" if rng.random() < 0.6 else "") + "\n".join(body) + "\n"
        self._atomic(note, text)
        note.lines += [line for line in text.splitlines() if f"s{self.seed}-p" in line]

    async def edit_atomic(self, note: Note, rng: random.Random) -> None:
        seq = self._start("edit_atomic", note)
        text = self.reread(note, seq)
        if text is not None:
            line = self.line(f"Atomic edit about [[{rng.choice(NAMES)}]]")
            self._atomic(note, with_line(text, line))
            note.lines.append(line)

    async def edit_in_place(self, note: Note, rng: random.Random) -> None:
        gap = rng.random() < 0.4
        seq = self._start("edit_in_place", note, gap=gap)
        text = self.reread(note, seq)
        if text is not None:
            line = self.line("In-place edit")
            await self._in_place(note, with_line(text, line), gap, rng)
            note.lines.append(line)

    async def edit_vim(self, note: Note, rng: random.Random) -> None:
        seq = self._start("edit_vim", note)
        text = self.reread(note, seq)
        if text is None:
            return
        line = self.line("Vim edit")
        full = self.vault / note.path
        backup = full.with_name(full.name + "~")
        os.rename(full, backup)
        full.write_text(with_line(text, line), encoding="utf-8")
        note.lines.append(line)
        await asyncio.sleep(rng.uniform(0.0, 0.05))
        backup.unlink()

    async def append(self, note: Note, rng: random.Random) -> None:
        seq = self._start("append", note)
        text = self.reread(note, seq)
        if text is None:
            return
        line = self.line("Appended")
        with open(self.vault / note.path, "a", encoding="utf-8") as handle:
            handle.write(("" if not text or text.endswith("\n") else "\n") + line + "\n")
        note.lines.append(line)

    async def property(self, note: Note, rng: random.Random) -> None:
        seq = self._start("property", note)
        text = self.reread(note, seq)
        if text is None:
            return
        value = f"soak_rev: {self.line('rev')}"
        edited = with_property(text, value)
        if rng.random() < 0.5:
            self._atomic(note, edited)
        else:
            await self._in_place(note, edited, rng.random() < 0.3, rng)
        note.lines = [line for line in note.lines if not line.startswith("soak_rev: ")] + [value]

    async def remove_line(self, note: Note, rng: random.Random) -> None:
        seq = self._start("remove_line", note)
        text = self.reread(note, seq)
        body_lines = [line for line in note.lines if not line.startswith("soak_rev: ")]
        if text is None or not body_lines:
            return
        gone = rng.choice(body_lines)
        kept = "".join(line for line in text.splitlines(keepends=True) if line.rstrip("\r\n") != gone)
        self._atomic(note, kept)
        note.lines.remove(gone)
        self.record.event("person", "removed", key=note.key, line=gone)

    async def move(self, note: Note, rng: random.Random) -> None:
        folder = rng.choice([f for f in FOLDERS if f != str(Path(note.path).parent).replace(".", "")])
        await self._rename(note, f"{folder}/{Path(note.path).name}".lstrip("/"), "move")

    async def rename(self, note: Note, rng: random.Random) -> None:
        """A new title; half the time links to it are updated in other notes, as Obsidian does by default."""
        old, title = note.path, self.fresh_title(rng)
        parent = Path(note.path).parent.as_posix()
        await self._rename(note, f"{parent}/{title}.md".lstrip("./"), "rename")
        if note.name == title and rng.random() < 0.5:
            await self._update_links(old, note.path, rng)

    async def _update_links(self, old: str, new: str, rng: random.Random) -> None:
        """Rewrite the links that meant the renamed note: `[[Folder/Old]]`, and `[[Old]]` when no other note
        has that name (Obsidian leaves a link that resolves to another note alone)."""
        old_stem, new_stem = Path(old).stem, Path(new).stem
        qualified = [(old[: -len(".md")], new[: -len(".md")])]
        if not any(p.stem.casefold() == old_stem.casefold() for p in self._disk_notes()):
            qualified.append((old_stem, new_stem))
        links = [(re.compile(r"\[\[" + re.escape(a) + r"(?=[\]|#])"), f"[[{b}") for a, b in qualified]

        def updated(text: str) -> str:
            for link, replacement in links:
                text = link.sub(lambda _m, r=replacement: r, text)
            return text

        for other in self.live():
            text = self._read(other) if other.key not in self.busy else None
            if text is None or updated(text) == text:
                continue
            self.busy.add(other.key)
            try:
                seq = self._start("update_links", other, old=old, new=new)
                text = self.reread(other, seq)
                if text is None:
                    continue
                await self._in_place(other, updated(text), False, rng)
                other.lines = [updated(line) for line in other.lines]
            finally:
                self.busy.discard(other.key)

    async def trash(self, note: Note, rng: random.Random) -> None:
        target = f"{TRASH}/{note.key} {Path(note.path).name}"
        note.home = note.path
        await self._rename(note, target, "trash")
        if note.path == target:
            note.state = "trashed"

    async def restore(self, note: Note, rng: random.Random) -> None:
        if (self.vault / note.home).exists():
            return
        await self._rename(note, note.home, "restore")
        if note.path == note.home:
            note.state = "live"

    async def delete(self, note: Note, rng: random.Random) -> None:
        seq = self._start("delete", note)
        if self.reread(note, seq) is None:
            return
        (self.vault / note.path).unlink()
        note.state = "deleted"
        note.lines = []

    async def _rename(self, note: Note, target: str, kind: str) -> None:
        seq = self._start(kind, note, to=target)
        if (self.vault / target).exists() or self.reread(note, seq) is None:
            return
        (self.vault / target).parent.mkdir(parents=True, exist_ok=True)
        os.rename(self.vault / note.path, self.vault / target)
        note.path = target
        note.paths.append((self.record.now(), target))

    # --- save styles ---------------------------------------------------------------------------------

    def _atomic(self, note: Note, text: str) -> None:
        """An atomic save: a temp file beside the note, renamed over it."""
        full = self.vault / note.path
        full.parent.mkdir(parents=True, exist_ok=True)
        temp = full.with_name(f".{full.name}.{self.counter}.saving")
        temp.write_text(text, encoding="utf-8")
        os.replace(temp, full)

    async def _in_place(self, note: Note, text: str, gap: bool, rng: random.Random) -> None:
        """Open, truncate, write, close (Node's fs.writeFile); the write may come a moment after the truncate."""
        truncated = self.record.now()
        with open(self.vault / note.path, "wb") as handle:
            if gap:
                handle.flush()
                await asyncio.sleep(rng.uniform(0.2, 0.5))
            handle.write(text.encode("utf-8"))
        if gap:  # the truncated note was empty until now
            seq = self.record.event(
                "person", "wrote-after-gap", key=note.key, path=note.path, since=truncated
            )
            note.gaps.append((truncated, self.record.times[seq], note.path))

    # --- the run -------------------------------------------------------------------------------------

    def seed_vault(self, rng: random.Random, count: int) -> None:
        """The vault the person already has when the first server starts."""
        for _ in range(count):
            folder = rng.choice(FOLDERS)
            (self.vault / folder).mkdir(exist_ok=True)
            note = self._new_key(f"{folder}/{self.fresh_title(rng)}.md".lstrip("/"), "person")
            lines = [self.line(f"Seeded note linking [[{rng.choice(NAMES)}]]"), self.line("More")]
            head = f"---\ntags: [seed]\nsoak_rev: {self.line('rev')}\n---\n" if rng.random() < 0.5 else ""
            (self.vault / note.path).write_text(head + "\n".join(lines) + "\n", encoding="utf-8")
            note.lines = [
                line for line in (head + "\n".join(lines)).splitlines() if f"s{self.seed}-p" in line
            ]
            self.record.person_op("seed", key=note.key, path=note.path)

    async def run(self, rng: random.Random, stop: asyncio.Event, rate: float) -> None:
        """One hand: operations at about `rate` a second until `stop`."""
        while not stop.is_set():
            await self.act(rng)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), rng.expovariate(rate))
