"""Load schema profiles from YAML and compose them into a `Profile`.

A profile file may `extends:` another profile and list `modules:`; `load_profile` reads the chain root
first, then every module, and merges them: a label defined in several files gets the union of its
properties; a relation defined in several files gets the union of its endpoints. Along the extends
chain a child's description, folder and decay_rate replace its parent's; modules only fill in what is
still unset, so the chosen profile stays in charge. Relation endpoints are checked only after merging,
so a module may use labels from base or from another module loaded with it.

Names are looked up in `search_path` first (`<dir>/<name>.yaml`, `<dir>/modules/<name>.yaml`), then
among the built-ins shipped in this package (read with importlib.resources, so an installed wheel works).
A name ending in `.yaml`/`.yml` or containing a slash is a path; inside a file, relative to that file.
"""

from __future__ import annotations

import difflib
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import resources
from importlib.resources.abc import Traversable
from pathlib import Path

import yaml

from profiles.errors import ProfileError
from profiles.parsing import ProfileFile, parse_profile_file
from profiles.schema import WILDCARD, LabelDef, Profile, RelationDef

__all__ = [
    "LabelDef",
    "Profile",
    "ProfileError",
    "RelationDef",
    "available_modules",
    "available_profiles",
    "load_profile",
]

# The C loader is several times faster; profiles are loaded at start-up and in every test.
_YAML_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_DEFAULT_DECAY_RATE = 0.005
# The rest of the system depends on these: unknown types become Note, reflect writes Insight ABOUT
# entities, and wikilinks become LINKS_TO. A profile that lacks them cannot work, so it is refused.
_REQUIRED_LABELS = ("Note", "Insight")
_REQUIRED_RELATIONS = ("LINKS_TO", "ABOUT")


@dataclass(frozen=True)
class _Source:
    """One YAML file: how to name it in messages, how to read it, where its relative paths start."""

    display: str
    resource: Traversable | Path
    directory: Path | None  # None for built-ins: their relative references are names, not paths


def available_profiles(search_path: Path | None = None) -> list[str]:
    """Names of the profiles `load_profile` accepts by name: built-ins plus any in `search_path`."""
    return _names(search_path, "profile")


def available_modules(search_path: Path | None = None) -> list[str]:
    """Names of the domain modules `load_profile` accepts: built-ins plus any in `search_path/modules`."""
    return _names(search_path, "module")


def load_profile(name: str = "base", modules: Sequence[str] = (), search_path: Path | None = None) -> Profile:
    """Compose profile `name` (a name or a path to a YAML file) with `modules` into a validated Profile.

    Raises ProfileError (a ValueError) naming the file and the entry at fault and what to do about it.
    """
    chain = _read_chain(name, search_path)
    module_names = _dedupe([*(m for f in chain for m in f.modules), *modules])
    module_files = _read_modules(module_names, chain, search_path)
    composer = _Composer()
    # The chosen profile is in charge: along its extends chain a child overrides its parent, while
    # modules only add properties and endpoints and fill in what the profile left unsaid.
    for spec in chain:
        composer.add(spec, override=True)
    for spec in module_files:
        composer.add(spec, override=False)
    leaf = chain[-1]
    default_rate = next((f.decay_rate for f in reversed(chain) if f.decay_rate is not None), None)
    return composer.build(
        name=leaf.name,
        description=leaf.description,
        modules=tuple(f.name for f in module_files),
        default_decay_rate=_DEFAULT_DECAY_RATE if default_rate is None else default_rate,
    )


def _read_chain(name: str, search_path: Path | None) -> list[ProfileFile]:
    """The profile and everything it extends, root first."""
    chain: list[ProfileFile] = []
    seen: list[str] = []
    source = _resolve(name, "profile", search_path, relative_to=None)
    while True:
        if source.display in seen:
            cycle = " -> ".join([*seen, source.display])
            raise ProfileError(f"{source.display}: `extends` loops ({cycle}); remove one of the links")
        seen.append(source.display)
        spec = _read(source, "profile")
        chain.insert(0, spec)
        if spec.extends is None:
            return chain
        source = _resolve(spec.extends, "profile", search_path, relative_to=spec.directory)


def _read_modules(names: list[str], chain: list[ProfileFile], search_path: Path | None) -> list[ProfileFile]:
    # A module listed inside a profile file is resolved relative to that file; one given by the caller
    # relative to the working directory. Mapping each name to its first referrer keeps that honest.
    referrer = {m: f.directory for f in reversed(chain) for m in f.modules}
    files: list[ProfileFile] = []
    seen: set[str] = set()
    for module in names:
        source = _resolve(module, "module", search_path, relative_to=referrer.get(module))
        if source.display not in seen:
            seen.add(source.display)
            files.append(_read(source, "module"))
    return files


def _read(source: _Source, kind: str) -> ProfileFile:
    """Read and parse one file; YAML syntax errors name the file and the line."""
    try:
        text = source.resource.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ProfileError(f"{source.display}: cannot read the file ({exc})") from exc
    try:
        data = yaml.load(text, Loader=_YAML_LOADER)  # noqa: S506 - a safe loader
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f", line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc)
        raise ProfileError(
            f"{source.display}{where}: invalid YAML ({problem}); fix the syntax there"
        ) from exc
    return parse_profile_file(data, source.display, kind, source.directory)


def _resolve(name: str, kind: str, search_path: Path | None, relative_to: Path | None) -> _Source:
    """Find the file for profile/module `name`: an explicit path, then search_path, then the built-ins."""
    if not isinstance(name, str) or not name.strip():
        raise ProfileError(f"a {kind} name must be a non-empty string, got {name!r}")
    name = name.strip()
    if _looks_like_path(name):
        path = Path(name).expanduser()
        if not path.is_absolute() and relative_to is not None:
            path = relative_to / path
        if not path.is_file():
            raise ProfileError(f"{kind} file {path} not found; check the path")
        path = path.resolve()  # one spelling per file, so `extends` loops and repeats are recognised
        return _Source(str(path), path, path.parent)
    key = name.lower()
    if search_path is not None:
        path = Path(search_path) / ("modules" if kind == "module" else "") / f"{key}.yaml"
        if path.is_file():
            return _Source(str(path), path, path.parent)
    builtin = _builtin_dir(kind) / f"{key}.yaml"
    if builtin.is_file():
        folder = "profiles/modules" if kind == "module" else "profiles"
        return _Source(f"{folder}/{key}.yaml", builtin, None)
    available = ", ".join(_names(search_path, kind)) or "none"
    hint = "" if kind == "module" else " (or give the path to a .yaml file)"
    raise ProfileError(f"unknown {kind} '{name}'; available {kind}s: {available}{hint}")


def _looks_like_path(name: str) -> bool:
    return name.endswith((".yaml", ".yml")) or "/" in name or "\\" in name


def _builtin_dir(kind: str) -> Traversable:
    root = resources.files("profiles")
    return root / "modules" if kind == "module" else root


def _names(search_path: Path | None, kind: str) -> list[str]:
    found = {p.name[: -len(".yaml")] for p in _builtin_dir(kind).iterdir() if p.name.endswith(".yaml")}
    if search_path is not None:
        folder = Path(search_path) / ("modules" if kind == "module" else "")
        if folder.is_dir():
            found.update(p.stem for p in folder.glob("*.yaml"))
    return sorted(found)


def _dedupe(names: list[str]) -> list[str]:
    return list(dict.fromkeys(n.strip() if isinstance(n, str) else n for n in names))


class _Composer:
    """Merges parsed files in order, then validates the result as a whole."""

    def __init__(self) -> None:
        self.labels: dict[str, dict] = {}  # canonical name -> merged state
        self.index: dict[str, str] = {}  # casefolded name -> canonical name
        self.relations: dict[str, dict] = {}
        self.endpoints: list[tuple[str, str, str, str]] = []  # (file, relation, "source"/"target", label)

    def add(self, spec: ProfileFile, override: bool) -> None:
        """Merge one file; with `override`, its description/folder/decay_rate replace earlier ones."""
        for entry in spec.labels:
            canonical = self.index.setdefault(entry.name.casefold(), entry.name)
            state = self.labels.setdefault(canonical, {"file": spec.display, "properties": {}})
            state["properties"].update(dict.fromkeys(entry.properties))
            for key in ("description", "folder", "decay_rate"):
                value = getattr(entry, key)
                if value is not None and (override or state.get(key) is None):
                    state[key] = value
                    state[f"{key}_file"] = spec.display
        for rel in spec.relations:
            state = self.relations.setdefault(rel.name, {"sources": {}, "targets": {}, "description": ""})
            state["sources"].update(dict.fromkeys(rel.sources))
            state["targets"].update(dict.fromkeys(rel.targets))
            if rel.description and (override or not state["description"]):
                state["description"] = rel.description
            self.endpoints += [(spec.display, rel.name, "source", s) for s in rel.sources]
            self.endpoints += [(spec.display, rel.name, "target", t) for t in rel.targets]

    def build(
        self, name: str, description: str, modules: tuple[str, ...], default_decay_rate: float
    ) -> Profile:
        labels = self._labels()
        relations = {
            rel: RelationDef(
                name=rel,
                sources=frozenset(self._endpoint(s) for s in state["sources"]),
                targets=frozenset(self._endpoint(t) for t in state["targets"]),
                description=state["description"],
            )
            for rel, state in self.relations.items()
        }
        self._check_endpoints()
        self._check_required(name, labels, relations)
        rates = {n: s.get("decay_rate", default_decay_rate) for n, s in self.labels.items()}
        return Profile(name, modules, labels, relations, rates, default_decay_rate, description)

    def _labels(self) -> dict[str, LabelDef]:
        labels: dict[str, LabelDef] = {}
        folders: dict[str, str] = {}
        for canonical, state in self.labels.items():
            if not state.get("description"):
                raise ProfileError(
                    f"{state['file']}: label {canonical} has no description; add one in the file that "
                    "introduces it (the model reads it to choose labels)"
                )
            folder = state.get("folder") or _pluralise(canonical)
            owner = folders.setdefault(folder.casefold(), canonical)
            if owner != canonical:
                where = state.get("folder_file", state["file"])
                raise ProfileError(
                    f"{where}: label {canonical} uses folder '{folder}', which already belongs to label "
                    f"{owner}; give each label its own folder so untyped notes map to one label"
                )
            props = tuple(state["properties"])
            labels[canonical] = LabelDef(canonical, state["description"], props, folder)
        return labels

    def _endpoint(self, label: str) -> str:
        return label if label == WILDCARD else self.index.get(label.casefold(), label)

    def _check_endpoints(self) -> None:
        for file, rel, side, label in self.endpoints:
            if label == WILDCARD or label.casefold() in self.index:
                continue
            close = difflib.get_close_matches(label, list(self.labels), n=1)
            hint = f" (did you mean '{close[0]}'?)" if close else ""
            verb = "sources" if side == "source" else "targets"
            raise ProfileError(
                f"{file}: relation {rel} {verb} unknown label '{label}'{hint}; "
                "define it in this file or fix the name"
            )

    @staticmethod
    def _check_required(name: str, labels: dict, relations: dict) -> None:
        missing = [lbl for lbl in _REQUIRED_LABELS if lbl not in labels]
        missing += [rel for rel in _REQUIRED_RELATIONS if rel not in relations]
        if missing:
            raise ProfileError(
                f"profile {name} lacks {', '.join(missing)}, which engrama-vault needs; "
                "add `extends: base` to the profile file"
            )


def _pluralise(label: str) -> str:
    """Default folder for a label without one: `Bug` -> `Bugs`, `Library` -> `Libraries`."""
    if label.endswith("y") and len(label) > 1 and label[-2].lower() not in "aeiou":
        return label[:-1] + "ies"
    if label.endswith(("s", "x", "z", "ch", "sh")):
        return label + "es"
    return label + "s"
