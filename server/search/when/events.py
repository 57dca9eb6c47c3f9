"""Questions about the order of events or the time between them, and the events they name.

"Which did I buy first, the blender or the espresso machine?" names two events that search must both
retrieve: `buy the blender`, `buy the espresso machine`. The events keep the question's verb when it is
cheap to see (the verb of "which ... did I VERB first", the subject of "who VERBed first", a bare second
event borrowing the first one's verb), so each sub-query reads like the note that would hold it.
Only English question forms are read; anything else yields no events (plain search still runs).
"""

from __future__ import annotations

import re
from typing import Literal

Kind = Literal["window", "order", "duration"]
Asked = tuple[Kind, tuple[str, ...], str | None]  # (kind, events, relation)

_AUX = r"(?:did|do|does|have|has|had|was|were|is|are|will|would)"
_GENERIC_VERBS = {
    "happen", "happened", "happens", "occur", "occurred", "come", "came", "take place", "took place",
    "was", "were", "is", "did", "do",
}  # fmt: skip
_ORDINAL = r"(?P<ord>first|earlier|sooner|later|last|most\s+recently|more\s+recently)"
_WHICH_FIRST = re.compile(
    r"^\s*(?P<wh>which|what|who)\b(?P<mid>[^?]*?)\s+"
    + _ORDINAL
    + r"\b(?:\s*,?\s*(?:second|and|then|third)\b)*"
    r"\s*[,:;-]?\s*(?:(?:between|among|out\s+of|of)\s+)?(?P<opts>[^?]+?)\s*[?.!]*\s*$",
    re.IGNORECASE,
)
_OPTIONS_FIRST = re.compile(
    r"^\s*(?P<opts>[^?]+?\bor\b[^?]+?)\s*[,:;?-]\s*(?:which|what|who)\b[^?]*\b" + _ORDINAL + r"\b",
    re.IGNORECASE,
)
_IN_ORDER = re.compile(r"\b(?:in\s+)?what\s+order\s+(?:did|do|were|was)\s+(?P<rest>[^?]+)", re.IGNORECASE)
_BEFORE_AFTER = re.compile(
    r"^\s*(?P<x>[^?]+?)\s+(?P<rel>before|after|prior\s+to)\s+(?:or\s+(?:before|after)\s+)?(?P<y>[^?]+?)\s*[?.!]*\s*$",
    re.IGNORECASE,
)
_HOW_LONG = re.compile(
    r"\bhow\s+(?:long|many\s+(?:\w+\s+)?(?:minutes|hours|days|weeks|months|years)|much\s+time)\b(?P<rest>[^?]*)",
    re.IGNORECASE,
)
_PASSED = re.compile(
    r"^\s*(?:(?:had|have|has|did|will)\s+)?(?:passed|elapsed|gone\s+by|went\s+by|go\s+by)\b", re.IGNORECASE
)
_DETERMINER = re.compile(r"^(?:the|a|an|my|our|his|her|their|your|this|that)\b", re.IGNORECASE)
_LEAD_IN = re.compile(
    r"^\s*(?:(?:the\s+(?:day|time|moment|date)|when)\s+(?:that\s+)?)?(?:" + _AUX + r"\s+)?(?:i|we)\s+"
    r"(?:" + _AUX + r"\s+)?",
    re.IGNORECASE,
)
_QUESTION_WORD = re.compile(r"^\s*(?:which|what|who|where|when|how)\b\s*", re.IGNORECASE)


def asked(question: str, dated: list[tuple[int, int]]) -> Asked | None:
    """(kind, events, relation) when `question` asks about the order of events or a duration, else None.

    `dated` holds the positions of the question's date phrases: "the week before 16 November" is a date,
    not an event to order against."""
    question = question.strip()
    if (m := _HOW_LONG.search(question)) is not None and (found := _duration(question, m)) is not None:
        return found
    if (m := _WHICH_FIRST.match(question)) is not None and (events := _which_first(m)):
        return "order", events, "first"
    if (m := _OPTIONS_FIRST.match(question)) is not None and len(opts := _options(m["opts"])) > 1:
        return "order", tuple(opts), "first"
    if (m := _IN_ORDER.search(question)) is not None:
        verb, _, rest = _strip_subject(m["rest"]).partition(" ")
        if len(opts := _options(rest)) > 1:
            return "order", tuple(f"{verb} {o}" for o in opts), "first"
    if (m := _BEFORE_AFTER.match(question)) is not None and not any(a <= m.start("y") < b for a, b in dated):
        x, y = _event(_strip_subject(_QUESTION_WORD.sub("", m["x"]))), _event(m["y"])
        # "after work", "before bed" are times of day, not events: the other event takes two words at least
        if x and len(y.split()) >= 2:
            return "order", (x, _parallel(x, y)), "after" if m["rel"].lower() == "after" else "before"
    return None


def _duration(question: str, m: re.Match[str]) -> Asked | None:
    """How long ago / since / between / before / after: a duration that relates events in time. A question
    that only measures ("how long is my commute", "how many hours did I spend") is not one."""
    rest = _PASSED.sub("", m["rest"]).strip()
    if re.search(r"\bafter\s+$", question[: m.start()], re.IGNORECASE):  # "after how many weeks did Tim ..."
        return "duration", _some(_event(_strip_subject(rest))), "after"
    if (x := re.match(r"(?:ago|back)\b\s*(?P<x>.*)", rest, re.IGNORECASE)) is not None:
        return "duration", _some(_event(_strip_subject(x["x"]))), "ago"
    if (x := re.match(r"(?:between|from)\s+(?P<x>.+)$", rest, re.IGNORECASE)) is not None:
        first, second = _pair(x["x"])
        return "duration", _some(first, _parallel(first, second) if first else second), "between"
    pattern = r"(?P<rel>before|after)\s+(?P<y>.+?)\s+" + _AUX + r"\s+(?P<x>.+)$"
    if (x := re.match(pattern, rest, re.IGNORECASE)) is not None:
        return "duration", _some(_event(_strip_subject(x["x"])), _event(x["y"])), x["rel"].lower()
    pattern = r"since\s+(?P<x>.+?)(?:\s*,?\s+(?:when|until|till|by\s+the\s+time)\s+(?P<y>.+))?$"
    if (x := re.match(pattern, rest, re.IGNORECASE)) is not None:
        return "duration", _some(_event(x["x"]), _event(x["y"] or "")), "since"
    if x := re.match(r"did\s+it\s+take\s+(?:for\s+(?P<who>.+?)\s+)?to\s+(?P<x>.+)$", rest, re.IGNORECASE):
        who = "" if (x["who"] or "").lower() in ("", "me", "us") else x["who"] + " "
        return "duration", _some(_event(who + x["x"])), "took"
    if m.group(0).lower().startswith("how long") and re.match(
        r"(?:have|has|had)\b", rest, re.IGNORECASE
    ):  # "how long have I had my cat": since it began
        return "duration", _some(_event(_strip_subject(rest))), "since"
    return None


def _which_first(m: re.Match[str]) -> tuple[str, ...]:
    opts = _options(m["opts"])
    if len(opts) < 2:
        return ()
    who = m["wh"].lower() == "who"
    words = m["mid"].split()
    noun = ""
    if not who and words and not re.fullmatch(_AUX, words[0], re.IGNORECASE):
        noun, words = words[0], words[1:]  # "which trip did I take": the options are trips
    verb = _strip_subject(" ".join(words))
    if who:
        return tuple(f"{o} {verb}".strip() for o in opts)
    if noun:
        opts = [re.sub(r"^(the|a)\s+one\b", rf"\1 {noun}", o, flags=re.IGNORECASE) for o in opts]
    if not verb or verb.lower() in _GENERIC_VERBS:
        return tuple(opts)
    return tuple(f"{verb} {o}" for o in opts)


def _options(text: str) -> list[str]:
    """ "the blender or the espresso machine", "Emma, Rachel and Alex" -> the options."""
    text = text.strip().strip(",:;").strip()
    parts = re.split(r"\s*,?\s+or\s+", text, flags=re.IGNORECASE)
    if len(parts) == 1:
        parts = re.split(r"\s*,\s*(?:and\s+)?|\s+and\s+", text, flags=re.IGNORECASE)
    return [p.strip(" ,") for p in parts if p.strip(" ,")]


def _pair(text: str) -> tuple[str, str]:
    """ "the day I started X and the day I harvested Y": split at the "and" that opens the second event
    (one followed by "the day", "when", "I" or "my"), else at the last "and"."""
    joints = list(re.finditer(r"\s+and\s+", text, re.IGNORECASE))
    if not joints:
        return _event(text), ""
    opening = [
        j for j in joints if re.match(r"(?:the\s+(?:day|time|date)|when|i|my)\b", text[j.end() :], re.I)
    ]
    joint = opening[0] if opening else joints[-1]
    return _event(text[: joint.start()]), _event(text[joint.end() :])


def _strip_subject(text: str) -> str:
    """ "did I buy the blender" -> "buy the blender"; "I started X" -> "started X"."""
    text = re.sub(r"^(?:" + _AUX + r"\s+)?(?:i|we|you)\s+(?:" + _AUX + r"\s+)?", "", text.strip(), flags=re.I)
    return re.sub(r"^" + _AUX + r"\s+", "", text, flags=re.IGNORECASE).strip()


def _event(text: str) -> str:
    return _LEAD_IN.sub("", text.strip()).strip(" ,;:?.!").strip()


def _parallel(x: str, y: str) -> str:
    """Give a bare second event the first one's verb: ("buy the blender", "the espresso machine") -> "buy the
    espresso machine"; ("Maria adopting Coco", "Shadow") -> "Maria adopting Shadow"."""
    y_words, x_words = y.split(), x.split()
    if not y_words or len(y_words) > 4:
        return y
    if _DETERMINER.match(y):
        head = next((i for i, w in enumerate(x_words) if _DETERMINER.match(w)), None)
        return " ".join(x_words[:head] + y_words) if head else y
    if y_words[0][:1].isupper() and len(y_words) <= 2 and len(x_words) > len(y_words) + 1:
        return " ".join(x_words[: -len(y_words)] + y_words)
    return y


def _some(*events: str) -> tuple[str, ...]:
    return tuple(e for e in events if e)
