"""The values a schema profile is made of: label and relation definitions, and the composed Profile.

A Profile is built once by `profiles.loader.load_profile` and then held by whoever needs it (settings,
the store, reflect); nothing here is cached globally.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import PurePosixPath
from types import MappingProxyType

from vault_sync.names import fold

WILDCARD = "*"
"""A relation endpoint that matches any label, even one the profile does not define."""

FALLBACK_LABEL = "Note"
FALLBACK_FOLDER = "Notes"
"""Folder for labels the profile does not know: such a node is stored as a `Note` (DESIGN §3)."""

_RELATION_SEPARATORS = re.compile(r"[\s\-]+")


def normalise_relation_name(name: str) -> str:
    """Spell a relation type the canonical way: `depends on`, `Depends-On` -> `DEPENDS_ON`."""
    return _RELATION_SEPARATORS.sub("_", name.strip()).upper()


@dataclass(frozen=True)
class LabelDef:
    """A node label: what it means, the properties worth recording, and the folder its notes are created in."""

    name: str
    description: str
    properties: tuple[str, ...]
    folder: str


@dataclass(frozen=True)
class RelationDef:
    """A relation type and the labels it may connect; `*` in `sources`/`targets` means any label."""

    name: str
    sources: frozenset[str]
    targets: frozenset[str]
    description: str = ""

    def allows(self, source_label: str, target_label: str) -> bool:
        """True when this relation may go from `source_label` to `target_label` (canonical spellings)."""
        source_ok = WILDCARD in self.sources or source_label in self.sources
        return source_ok and (WILDCARD in self.targets or target_label in self.targets)


@dataclass(frozen=True)
class Profile:
    """A composed schema: the base profile (and what it extends) plus any domain modules.

    Label names are matched case-insensitively, relation names after `normalise_relation_name`;
    every lookup answers with the canonical spelling, so callers can store what they get back.
    """

    name: str
    modules: tuple[str, ...]
    labels: Mapping[str, LabelDef] = field(hash=False)
    relations: Mapping[str, RelationDef] = field(hash=False)
    decay_rates: Mapping[str, float] = field(hash=False)
    default_decay_rate: float = 0.005
    description: str = ""
    _label_index: Mapping[str, str] = field(init=False, repr=False, compare=False, hash=False)
    _folder_index: Mapping[str, str] = field(init=False, repr=False, compare=False, hash=False)

    def __post_init__(self) -> None:
        # Read-only views, so a Profile handed around cannot be changed behind its holder's back.
        object.__setattr__(self, "labels", MappingProxyType(dict(self.labels)))
        object.__setattr__(self, "relations", MappingProxyType(dict(self.relations)))
        object.__setattr__(self, "decay_rates", MappingProxyType(dict(self.decay_rates)))
        label_index = {name.casefold(): name for name in self.labels}
        folder_index = {fold(label.folder): label.name for label in self.labels.values()}
        object.__setattr__(self, "_label_index", MappingProxyType(label_index))
        object.__setattr__(self, "_folder_index", MappingProxyType(folder_index))

    def label_names(self) -> tuple[str, ...]:
        """Label names in definition order (base profile first, then modules)."""
        return tuple(self.labels)

    def relation_names(self) -> tuple[str, ...]:
        """Relation type names in definition order."""
        return tuple(self.relations)

    def has_label(self, name: str) -> bool:
        """True when the profile defines `name` (case-insensitively)."""
        return self.canonical_label(name) is not None

    def canonical_label(self, name: str) -> str | None:
        """The profile's spelling of label `name` (`project` -> `Project`), or None when it is unknown."""
        if not isinstance(name, str):
            return None
        return self._label_index.get(name.strip().casefold())

    def canonical_relation(self, name: str) -> str | None:
        """The profile's spelling of relation `name` (`uses`, `Uses`, `depends-on`), or None when unknown."""
        if not isinstance(name, str):
            return None
        key = normalise_relation_name(name)
        return key if key in self.relations else None

    def allows(self, rel: str, source_label: str, target_label: str) -> bool:
        """True when relation `rel` may connect a `source_label` node to a `target_label` node.

        Names are normalised first. A label the profile does not know only passes a `*` endpoint,
        which is how LINKS_TO and RELATED_TO accept stubs and nodes kept from an older profile.
        """
        canonical = self.canonical_relation(rel)
        if canonical is None:
            return False
        source = self.canonical_label(source_label) or source_label
        target = self.canonical_label(target_label) or target_label
        return self.relations[canonical].allows(source, target)

    def folder_for(self, label: str) -> str:
        """Vault folder where a new note for `label` is created; `Notes` for a label the profile lacks."""
        canonical = self.canonical_label(label)
        return self.labels[canonical].folder if canonical else FALLBACK_FOLDER

    def folder_labels(self) -> dict[str, str]:
        """Folder name -> label, to label notes that carry no `type` (see `label_for_path`)."""
        return {label.folder: label.name for label in self.labels.values()}

    def label_for_path(self, path: str) -> str | None:
        """Label implied by the first folder of a vault-relative `path` (case-insensitive, either Unicode form:
        macOS spells `Réunions` decomposed), or None.

        `Projects/engrama.md` -> `Project`; a note at the vault root, or in a folder no label owns, gets None
        and the caller falls back to `Note`.
        """
        parts = PurePosixPath(str(path).replace("\\", "/")).parts
        if len(parts) < 2:
            return None
        return self._folder_index.get(fold(parts[0]))

    def decay_rate_for(self, label: str) -> float:
        """Per-day confidence decay rate for `label`, or the profile default for unknown labels."""
        canonical = self.canonical_label(label)
        return (
            self.decay_rates.get(canonical, self.default_decay_rate) if canonical else self.default_decay_rate
        )

    def describe(self) -> str:
        """A compact text summary of labels and relations, for guidance shown to the model."""
        lines = [f"Profile {self.name}" + (f" + {', '.join(self.modules)}" if self.modules else "")]
        lines.append("Labels:")
        for label in self.labels.values():
            props = f" [{', '.join(label.properties)}]" if label.properties else ""
            lines.append(f"- {label.name} (folder {label.folder}){props}: {label.description}")
        lines.append("Relations:")
        for rel in self.relations.values():
            ends = f"{'|'.join(sorted(rel.sources))} -> {'|'.join(sorted(rel.targets))}"
            lines.append(f"- {rel.name}: {ends}" + (f" — {rel.description}" if rel.description else ""))
        return "\n".join(lines)
