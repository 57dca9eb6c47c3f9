"""The brief's sections, built from what `brief._gather` read: each a ranked list of one-line Markdown items.

Every item names its note as an Obsidian wikilink (`brief_render.wikilink`) so the person can click through.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from profiles.schema import WILDCARD, Profile
from server.search.service import SearchHit
from server.services.brief_render import Item, Section, one_line, show_value, wikilink
from server.store import insights_sql
from server.store.brief_sql import Entry, FactChange, Mark, OpenClarification, is_new
from server.store.history_sql import NOTE_EDIT_REASON

# `status` values that mean a piece of work or a problem is no longer open (compared casefolded).
CLOSED = frozenset(
    "done closed resolved solved fixed finished complete completed cancelled canceled abandoned dropped "
    "archived paused inactive shelved superseded rejected wontfix".split()
) | {"on hold", "on-hold", "won't fix"}
NEW_VAULT_NOTES = 10  # below this many notes, the brief also says how to grow the memory
SHOWN = {"work": 8, "problems": 3, "decisions": 6, "people": 6}
SNIPPET_CHARS = 200
PER_LINE = 5  # new, edited or archived notes named on one line


def closed(state: str) -> bool:
    return state.strip().casefold() in CLOSED


@dataclass(frozen=True)
class Roles:
    """Which labels of the profile play which part in the brief (derived from its relation types)."""

    work: tuple[str, ...]
    problems: tuple[str, ...]
    decisions: tuple[str, ...]
    people: tuple[str, ...]


def roles(profile: Profile) -> Roles:
    """Work is what people WORK_ON, problems what work HAS_PROBLEM, decisions what CHOOSES, people who
    WORK_ON; the base labels (Project, Problem, Decision, Person) when a profile lacks those relations."""

    def ends(relation: str, side: str, fallback: str) -> tuple[str, ...]:
        rel = profile.relations.get(relation)
        found = sorted(x for x in getattr(rel, side, ()) if x != WILDCARD) if rel else []
        return tuple(found) or ((fallback,) if fallback in profile.labels else ())

    return Roles(
        work=ends("WORKS_ON", "targets", "Project"),
        problems=ends("HAS_PROBLEM", "targets", "Problem"),
        decisions=ends("CHOOSES", "sources", "Decision"),
        people=ends("WORKS_ON", "sources", "Person"),
    )


@dataclass(frozen=True)
class Gathered:
    """Everything the brief reads from the store, read in one unit (one consistent snapshot)."""

    roles: Roles
    notes: int
    entities: int
    since: str | None  # when the client's previous brief was read; None for a first brief
    window: str  # changes are read from this moment on
    changed: list[Entry]
    counts: dict[str, int]
    facts: list[FactChange]
    clarifications: list[OpenClarification]
    insights: list[tuple[insights_sql.InsightRow, list[Entry]]]
    work: list[Entry]
    decisions: list[Entry]
    people: list[Entry]
    links: list[tuple[str, Entry]]  # (anchor id: the focus or an active piece of work, linked entity)
    focus: Entry | None
    mark: Mark | None


def build(
    got: Gathered,
    hits: Sequence[SearchHit],
    ambiguous: set[str],
    *,
    client: str | None,
    query: str,
    project: str | None,
    vault: bool,
    taking_in: int | None = None,
) -> tuple[list[str], list[Section]]:
    """The header lines and the sections, most important first. `taking_in`: the changes the server's first
    reconcile of the vault still has to go through (None once it is done)."""

    def link(name: str, path: str | None) -> str:
        return wikilink(name, path, ambiguous)

    taking = (
        f"engrama is still taking in the vault ({got.notes:,} notes so far): this brief shows only part of it. "
        "Search works on what is in; ask for the brief again in a minute."
    )
    if got.entities == 0 and taking_in is not None:
        return ["# Memory brief: the vault is being taken in", taking], []
    if got.entities == 0:
        return _empty_header(vault), []
    sections = [
        _related(hits, query, link) if query else None,
        _changes(got, link),
        _waiting(got, link),
        *_work(got, link),
    ]
    header = _header(got, client, project)
    if taking_in is not None:
        header.insert(1, taking)
    return header, [s for s in sections if s is not None and s.items]


def _header(got: Gathered, client: str | None, project: str | None) -> list[str]:
    who = f" for {one_line(client, 60)}" if client else ""
    if got.since is None:
        when = "first brief" if client else "no per-client history"
        title = f"# Memory brief{who}: {got.notes:,} notes ({when}; changes of the last days)"
    else:
        title = f"# Memory brief{who}: {got.notes:,} notes, changes since {_moment(got.since)}"
    lines = [title]
    if project and project.strip() and got.focus is None:
        lines.append(f'No entity is named "{one_line(project, 80)}"; this brief covers the whole vault.')
    if got.since is not None and not got.changed and not got.facts:
        lines.append("Nothing changed in the vault since the previous brief.")
    if got.notes < NEW_VAULT_NOTES:
        lines.append(
            "A new vault: as the person talks about their projects, people and decisions, keep them with "
            "engrama_remember; notes they write in Obsidian are picked up as they save."
        )
    return lines


def _empty_header(vault: bool) -> list[str]:
    where = (
        "write notes in the Obsidian vault (they are picked up as they are saved); if it already has notes, "
        "sync it once with engrama_sync_vault or `engrama-vault sync --vault PATH`."
        if vault
        else "no vault is configured: start the server with `--vault PATH` (or ENGRAMA_VAULT) pointing at the "
        "Obsidian vault."
    )
    return [
        "# Memory brief: the memory is empty",
        "Nothing is remembered yet. To start, ask the person what they are working on and keep the projects, "
        f"people, decisions and problems they mention with engrama_remember (each becomes a note); or {where}",
    ]


def _moment(stamp: str) -> str:
    return stamp[:16].replace("T", " ") + " UTC"


def _related(hits: Sequence[SearchHit], query: str, link: Any) -> Section:
    items = [
        Item(
            f"{link(h.name, h.path)} ({h.label}): {one_line(h.snippet, SNIPPET_CHARS)}".rstrip(": "),
            h.name,
            h.path,
        )
        for h in hits
    ] or [Item("nothing found; try other words with engrama_search")]
    return Section("related", f'Related to "{one_line(query, 60)}"', tuple(items), len(items))


def _changes(got: Gathered, link: Any) -> Section:
    by_node: dict[str, list[FactChange]] = {}
    for change in got.facts:
        by_node.setdefault(change.node.id, []).append(change)
    items = [_fact_item(changes, link) for changes in by_node.values()]
    rest = [e for e in got.changed if e.id not in by_node]
    new = [e for e in rest if is_new(e, got.window, first=got.since is None)]
    deleted = [e for e in rest if e.deleted and e not in new]
    archived = [e for e in rest if e.status == "archived" and e not in deleted]
    edited = [e for e in rest if e not in new and e not in archived and e not in deleted]
    items += _grouped("new", [(e, f"{link(e.name, e.path)} ({e.label})") for e in new])
    items += _grouped("archived", [(e, link(e.name, e.path)) for e in archived])
    items += _grouped("deleted", [(e, link(e.name, None)) for e in deleted])
    # A first brief cannot tell a note made in its window from one edited there (`brief_sql.is_new`).
    items += _grouped(
        "changed" if got.since is None else "edited", [(e, link(e.name, e.path)) for e in edited]
    )
    # A node whose facts changed was edited too (its history row and its update come together): count it once.
    total = max(got.counts["total"], len(by_node))
    title = "Changed since the previous brief" if got.since else "Changed recently"
    return Section("changes", title, tuple(items), max(total, sum(i.covers for i in items)))


def _grouped(verb: str, named: Sequence[tuple[Entry, str]]) -> list[Item]:
    """Notes of one kind of change, several to a line (a line per note would spend the budget on bullets)."""
    return [
        Item(
            f"{verb}: " + ", ".join(text for _, text in named[i : i + PER_LINE]),
            named[i][0].name,
            named[i][0].path,
            covers=len(named[i : i + PER_LINE]),
        )
        for i in range(0, len(named), PER_LINE)
    ]


def _fact_item(changes: list[FactChange], link: Any) -> Item:
    node = changes[0].node
    parts = []
    for c in changes:
        why = f" ({one_line(c.reason, 80)})" if c.source == "tool" and c.reason != NOTE_EDIT_REASON else ""
        parts.append(f"{c.key}: {show_value(c.old)} -> {show_value(c.new)}{why}")
    return Item(one_line(f"{link(node.name, node.path)} " + "; ".join(parts)), node.name, node.path)


def _waiting(got: Gathered, link: Any) -> Section:
    items = [
        Item(
            one_line(
                f"{link(c.node.name, c.node.path)} {c.key}: {show_value(c.current)} or {show_value(c.proposed)}? "
                "ask, then engrama_remember with resolve=replace or keep_both"
            ),
            c.node.name,
            c.node.path,
        )
        for c in got.clarifications
    ]
    for row, about in got.insights:
        names = ", ".join(link(e.name, e.path) for e in about[:3])
        items.append(Item(one_line(f"insight {row.id} ({row.confidence:.2f}): {row.title}; about {names}")))
    title = "Waiting for the person's decision"
    if got.insights:
        title += " (insights: engrama_approve_insight)"
    return Section("waiting", title, tuple(items), len(items))


def _work(got: Gathered, link: Any) -> list[Section]:
    parts, anchored = got.roles, _by_anchor(got.links)
    work = ([got.focus] if got.focus and got.focus.label in parts.work else []) + [
        e for e in got.work if not got.focus or e.id != got.focus.id
    ]
    work_items = []
    for entry in work[: SHOWN["work"]]:
        problems = [
            e for e in anchored.get(entry.id, []) if e.label in parts.problems and not closed(e.state)
        ]
        state = f" ({entry.state})" if entry.state else ""
        open_ = ", ".join(link(e.name, e.path) for e in problems[: SHOWN["problems"]])
        more = f" +{len(problems) - SHOWN['problems']}" if len(problems) > SHOWN["problems"] else ""
        text = f"{link(entry.name, entry.path)}{state}" + (f"; open: {open_}{more}" if problems else "")
        work_items.append(Item(one_line(text), entry.name, entry.path))
    anchors = ([got.focus] if got.focus and got.focus not in work else []) + work[: SHOWN["work"]]
    return [
        Section("work", f"Active {_plural(parts.work)}", tuple(work_items), len(work)),
        _decisions(got, anchored, link),
        _people(got, anchored, anchors, link),
    ]


def _decisions(got: Gathered, anchored: dict[str, list[Entry]], link: Any) -> Section:
    near = {e.id for e in anchored.get(got.focus.id, [])} if got.focus else set()
    ranked = sorted(got.decisions, key=lambda e: (e.id in near, e.valid_from or e.active_at), reverse=True)
    items = []
    for e in ranked[: SHOWN["decisions"]]:
        when = (e.valid_from or e.active_at)[:10]
        state = f", {e.state}" if e.state else ""
        items.append(Item(f"{link(e.name, e.path)} ({when}{state})", e.name, e.path))
    return Section("decisions", "Recent decisions", tuple(items), len(got.decisions))


def _people(got: Gathered, anchored: dict[str, list[Entry]], work: Sequence[Entry], link: Any) -> Section:
    """People linked to the focus and the active work (in that order), then the most recently touched."""
    with_work: dict[str, tuple[Entry, list[Entry]]] = {}
    for anchor in work:
        for e in anchored.get(anchor.id, []):
            if e.label in got.roles.people:
                with_work.setdefault(e.id, (e, []))[1].append(anchor)
    people = list(with_work.values()) + [(e, []) for e in got.people if e.id not in with_work]
    items = []
    for person, on in people[: SHOWN["people"]]:
        also = ", ".join(link(w.name, w.path) for w in on[:2])
        text = link(person.name, person.path) + (f" ({also})" if also else "")
        items.append(Item(text, person.name, person.path))
    return Section("people", "People recently involved", tuple(items), len(people))


def _by_anchor(links: Sequence[tuple[str, Entry]]) -> dict[str, list[Entry]]:
    anchored: dict[str, list[Entry]] = {}
    for anchor, entry in links:
        if all(e.id != entry.id for e in anchored.get(anchor, [])):
            anchored.setdefault(anchor, []).append(entry)
    for entries in anchored.values():
        entries.sort(key=lambda e: e.active_at, reverse=True)
    return anchored


def _plural(labels: Sequence[str]) -> str:
    return ", ".join(label.lower() + ("es" if label.endswith("s") else "s") for label in labels) or "work"
