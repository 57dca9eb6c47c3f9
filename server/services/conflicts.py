"""What `engrama_remember` does when a property it sets already has a different value.

A fact is never silently overwritten (issue #8). For each such property:
- `resolve="replace"`: the new value replaces the old, which is kept as history (with when and why);
- `resolve="keep_both"`: the property becomes a list holding the old values and the new one;
- no `resolve`: a property that holds one value at a time by nature (a status, a version, a date, a
  number...) is replaced, the old value kept as history. For any other property (an employer, a city, a
  partner) the call cannot tell whether the new value replaces the old or joins it, so that property is left
  as it is and the result carries a `clarification`: both values and the question to ask the person. The
  rest of the call is applied.

Values are compared the way a person reads them: case and surrounding spaces do not count, a value already
in a list is not new, and a list that only adds items to the old one extends it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from server.services.errors import ServiceError

RESOLVE_CHOICES = ("replace", "keep_both")
# Properties that hold one value at a time: a new value always replaces the old one.
SINGLE_VALUED = frozenset(
    {
        "status",
        "state",
        "stage",
        "phase",
        "version",
        "priority",
        "progress",
        "rating",
        "score",
        "level",
        "due",
        "deadline",
        "date",
        "start",
        "end",
        "started",
        "ended",
        "updated",
        "valid_from",
        "valid_to",
        "confidence",
        "age",
        "birthday",
    }
)
_DATE = re.compile(r"\d{4}-\d{2}-\d{2}([T ][0-9:.]+Z?)?")


@dataclass(frozen=True)
class Clarification:
    key: str
    current: Any
    proposed: Any
    question: str


@dataclass
class PropertyPlan:
    """What to write: the properties, which of them replace an old value, and what to ask instead."""

    write: dict[str, Any] = field(default_factory=dict)
    replaced: list[str] = field(default_factory=list)
    clarifications: list[Clarification] = field(default_factory=list)
    held: list[str] = field(default_factory=list)  # already there, as the person spells it: left as it is


def require_resolve(resolve: str | None) -> str | None:
    if resolve is None or not resolve.strip():
        return None
    choice = resolve.strip().lower()
    if choice not in RESOLVE_CHOICES:
        raise ServiceError(
            f"resolve must be 'replace' (the new value replaces the old, which is kept as history) or "
            f"'keep_both' (the property holds both values), not {resolve!r}"
        )
    return choice


def plan_properties(
    name: str, current: Mapping[str, Any], proposed: Mapping[str, Any], resolve: str | None
) -> PropertyPlan:
    """Decide, key by key, how `proposed` meets the entity's `current` properties."""
    plan = PropertyPlan()
    for key, new in proposed.items():
        old = current.get(key)
        if _empty(old):
            plan.write[key] = new
        elif old == new:
            continue  # already so: nothing to write, nothing to say
        elif _same(old, new) and resolve != "replace":
            # The same value, case and spacing aside: the person's spelling stays (review 23a).
            plan.held.append(key)
        elif _same(old, new):
            # Asked to replace it: the spelling is corrected, the old one kept as history (review 23g).
            plan.write[key] = new
            plan.replaced.append(key)
        elif isinstance(old, list) and _contains(old, new):
            continue  # already there: keep the person's list as it is
        elif resolve == "keep_both":
            plan.write[key] = _both(old, new)
        elif resolve == "replace" or _single_valued(key, old, new):
            plan.write[key] = new
            plan.replaced.append(key)
        else:
            plan.clarifications.append(Clarification(key, old, new, _question(name, key, old, new)))
    return plan


def _norm(value: Any) -> Any:
    return value.strip().casefold() if isinstance(value, str) else value


def _items(value: Any) -> list[Any]:
    return [_norm(v) for v in (value if isinstance(value, list) else [value])]


def _empty(value: Any) -> bool:
    return value is None or value == "" or value == []


def _same(old: Any, new: Any) -> bool:
    return _items(old) == _items(new) if isinstance(old, list) == isinstance(new, list) else False


def _contains(old: list[Any], new: Any) -> bool:
    """True when every item of `new` is already in the list `old`."""
    have = _items(old)
    return all(item in have for item in _items(new))


def _both(old: Any, new: Any) -> list[Any]:
    merged = list(old) if isinstance(old, list) else [old]
    have = _items(merged)
    for item in new if isinstance(new, list) else [new]:
        if _norm(item) not in have:
            merged.append(item)
            have.append(_norm(item))
    return merged


def _single_valued(key: str, old: Any, new: Any) -> bool:
    if key.strip().casefold() in SINGLE_VALUED:
        return True
    if isinstance(old, list) and isinstance(new, list):
        return _contains(new, old)  # the new list only adds items to the old one
    if isinstance(old, list) or isinstance(new, list):
        return False
    numbers = (int, float)
    if isinstance(old, numbers) and isinstance(new, numbers):
        return True  # bool is an int too: a flag flips
    return all(isinstance(v, str) and _DATE.fullmatch(v.strip()) for v in (old, new))


def _question(name: str, key: str, old: Any, new: Any) -> str:
    return (
        f"{name}'s {key} is {_show(old)} and you were told {_show(new)}. Ask the person: does {_show(new)} "
        f"replace {_show(old)} (call engrama_remember again with resolve='replace'; {_show(old)} is kept as "
        f"history), or does {name} have both (resolve='keep_both')?"
    )


def _show(value: Any) -> str:
    if isinstance(value, list):
        return "[" + ", ".join(_show(v) for v in value) + "]"
    return repr(value) if isinstance(value, str) else str(value)
