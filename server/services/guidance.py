"""The instructions `engrama_ingest` gives the agent: what to extract, with which labels and relation
types of the active profile, and which tools to call afterwards."""

from __future__ import annotations

from profiles import Profile
from server.services.schema import TOOL_ONLY_LABELS, endpoints
from server.store import Node

_BY_SOURCE = {
    "note": (
        "The content is a note from the person's vault. It is already stored; do not copy its text into "
        "observations. Extract the entities it mentions and how they relate to the note's own entity."
    ),
    "text": (
        "The content is text the person gave you. Extract the durable facts: who and what it is about, "
        "decisions, problems and what was learnt."
    ),
    "conversation": (
        "The content is a conversation. Keep what the person said about their own work, people, tools, "
        "decisions and problems; skip small talk, greetings and anything only the assistant claimed."
    ),
}

_STEPS = """How to store it:
1. List the entities worth remembering long-term; give each one label from the list below.
2. Check `existing` first: when an entity is already there, use exactly that name and label so the
   write merges into it instead of creating a duplicate.
3. Call engrama_remember once per entity: label, name, a few properties, and an observation of one or
   two sentences in the person's words (keep dates). Put relations to other entities in `relations`.
4. Call engrama_relate for any further connection between two entities.
5. Never invent facts, and do not store secrets (passwords, keys, tokens)."""


def extraction_guidance(
    profile: Profile, source_type: str, note: Node | None, hint: str | None, truncated: bool
) -> str:
    """The guidance text for one ingest call."""
    parts = [_BY_SOURCE[source_type]]
    if note is not None:
        parts.append(
            f"This note is the {note.label} {note.name!r}: remember facts about it under that label and "
            "name so they merge into the note, and relate the other entities to it."
        )
    if hint and hint.strip():
        parts.append(f"The person's hint about this source: {hint.strip()}")
    if truncated:
        parts.append("The content was cut short; ingest the rest as a separate text if it matters.")
    parts.append(_STEPS)
    parts.append(_vocabulary(profile))
    return "\n\n".join(parts)


def _vocabulary(profile: Profile) -> str:
    lines = ["Labels (the `label` argument):"]
    for label in profile.labels.values():
        if label.name in TOOL_ONLY_LABELS:
            continue
        props = f" Properties: {', '.join(label.properties)}." if label.properties else ""
        lines.append(f"- {label.name}: {label.description}{props}")
    lines.append("Relation types (`type` in relations, `rel_type` in engrama_relate), source -> target:")
    for rel in profile.relations.values():
        if rel.name in ("LINKS_TO", "ABOUT"):  # written by wikilinks and by reflect, not by the agent
            continue
        about = f" — {rel.description}" if rel.description else ""
        lines.append(f"- {rel.name}: {endpoints(profile, rel.name)}{about}")
    return "\n".join(lines)
