"""The date phrases of a question and their windows, read against "today" (the reference's date).

Each family of phrases is one pattern and one small function (registered in order with `@_pattern`); a
phrase overlapping one an earlier pattern took is skipped, so "last May" is not also "May", nor
"May 5, 2023" also "2023". Then neighbouring phrases are read together (`_refine`): ranges, "since", "the
week before X", a weekday inside another window. The rules are the module docstring of `server.search.when`.
The module is longer than most because each family is one small function and their order matters (a
family registered earlier takes its words first); splitting them would scatter that order.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from datetime import date, timedelta

from server.search.when.dates import (
    DAY,
    FULL_MONTH,
    HOLIDAYS,
    ISO,
    MONTH,
    SEASONS,
    YEAR,
    YEAR_LAST,
    Annual,
    Span,
    add_months,
    calendar_span,
    month,
    month_span,
    nth_weekday,
    occurrence,
    one_day,
    to_date,
    week_start,
    year_last,
)


@dataclass(frozen=True)
class Found:
    """A phrase at `at` (start, end in the text) and its windows. `weekday` marks a bare weekday that may
    narrow a neighbouring window; `annual` and `has_year` let a range lend its year to a yearless end;
    `relative` marks a phrase counted from the reference ("two weeks ago") rather than a calendar date."""

    at: tuple[int, int]
    spans: tuple[Span, ...]
    weekday: int | None = None
    annual: Annual | None = None
    has_year: bool = True
    relative: bool = False
    recurring: bool = False  # a yearly thing named without a year or "last"/"next": any year's occurrence


def find(text: str, today: date) -> list[Found]:
    """Every date phrase of `text` with its windows, in reading order."""
    taken: list[Found] = []
    for pattern, handler in _PATTERNS:
        for m in pattern.finditer(text):
            if any(m.start() < f.at[1] and f.at[0] < m.end() for f in taken):
                continue
            try:
                found = handler(m, today)
            except (ValueError, OverflowError):  # a window past year 1 or 9999
                continue
            if found is not None:
                taken.append(found)
    return _refine(text, today, sorted(taken, key=lambda f: f.at))


Handler = Callable[[re.Match[str], date], "Found | None"]
_PATTERNS: list[tuple[re.Pattern[str], Handler]] = []


def _pattern(regex: str) -> Callable[[Handler], Handler]:
    def register(handler: Handler) -> Handler:
        _PATTERNS.append((re.compile(regex, re.IGNORECASE), handler))
        return handler

    return register


def _found(
    m: re.Match[str], *spans: Span | None, weekday: int | None = None, relative: bool = False
) -> Found | None:
    kept = tuple(s for s in spans if s is not None and s[0] <= s[1])
    return Found(m.span(), kept, weekday=weekday, relative=relative) if kept else None


def _annual(m: re.Match[str], annual: Annual, today: date, mode: str = "") -> Found | None:
    """A yearly thing: its given year's occurrence, else the one `mode` picks (`dates.occurrence`)."""
    if m.groupdict().get("year"):
        return _found(m, annual(int(m["year"])))
    span = occurrence(annual, today, mode)
    if span is None:
        return None
    return Found(m.span(), (span,), annual=annual, has_year=False, recurring=not mode)


_NUMBER_WORDS = {
    "a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8,
    "nine": 9, "ten": 10, "eleven": 11, "twelve": 12, "thirteen": 13, "fourteen": 14, "fifteen": 15,
    "sixteen": 16, "seventeen": 17, "eighteen": 18, "nineteen": 19, "twenty": 20, "thirty": 30,
}  # fmt: skip
# Vague counts as the ranges the words cover in plain English.
_VAGUE = {"couple": (2, 3), "few": (2, 4), "several": (3, 7)}
_NUM = (
    r"(?P<num>\d{1,5}|(?:a\s+)?couple(?:\s+of)?|(?:a\s+)?few|several|"
    + "|".join(sorted(_NUMBER_WORDS, key=len, reverse=True))
    + ")"
)
_UNIT = r"(?P<unit>day|week|fortnight|month|year)s?"
_HEDGE = r"(?:(?P<hedge>about|around|roughly|approximately|nearly|almost|over|more\s+than|less\s+than)\s+)?"
WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
# A plural or "Saturday mornings" is a habit, not a day.
_WEEKDAY = (
    r"(?P<wd>" + "|".join(WEEKDAYS) + r")(?!s\b)(?!\s+(?:mornings|afternoons|evenings|nights)\b)"
    r"(?:\s+(?:morning|afternoon|evening|night))?"
)
_MODE = r"(?P<mode>last|this\s+past|past|previous|this|next|coming)"
_HOLIDAY = "(?P<hol>" + "|".join(re.escape(h) for h in sorted(HOLIDAYS, key=len, reverse=True)) + ")"


def _mode(m: re.Match[str]) -> str:
    mode = " ".join((m.groupdict().get("mode") or "").lower().split())
    return {"this past": "last", "past": "last", "previous": "last", "coming": "next"}.get(mode, mode)


@_pattern(r"\b(?:the\s+)?day\s+(?:before\s+yesterday|after\s+tomorrow)\b")
def _two_days(m: re.Match[str], today: date) -> Found | None:
    day = today + timedelta(days=-2 if "yesterday" in m.group(0).lower() else 2)
    return _found(m, (day, day), relative=True)


@_pattern(
    r"\b(?P<word>today|tonight|this\s+(?:morning|afternoon|evening)|earlier\s+today|yesterday|last\s+night"
    r"|tomorrow)\b"
)
def _day_word(m: re.Match[str], today: date) -> Found | None:
    word = m["word"].lower()
    offset = -1 if word == "yesterday" or word.startswith("last") else 1 if word == "tomorrow" else 0
    day = today + timedelta(days=offset)
    return _found(m, (day, day), relative=True)


# Whole numbers only: "1000 days ago" was read from its last three digits (review 22d); "1,000" is no count.
@_pattern(r"(?<![\w,.])" + _HEDGE + _NUM + r"\s+" + _UNIT + r"\s+(?P<way>ago|back|before\s+now|from\s+now)\b")
def _ago(m: re.Match[str], today: date) -> Found | None:
    low, high = _count(m["num"])
    sign = 1 if m["way"].lower().startswith("from") else -1
    unit = m["unit"].lower()
    near, far = _moved(today, sign * low, unit), _moved(today, sign * high, unit)
    # Rounded to the unit's grain: half a unit either side; a hedge ("about") doubles that.
    half = timedelta(days=_HALF[unit] * 2 + 1 if m["hedge"] else _HALF[unit])
    start, end = min(near, far) - half, max(near, far) + half
    return _found(m, (start, min(end, today) if sign < 0 else end), relative=True)


@_pattern(
    r"\b(?:(?:in|over|during|within|for|throughout)\s+)?the\s+(?P<which>past|last|previous)\s+(?:"
    + _NUM
    + r"\s+)?"
    + _UNIT
    + r"\b(?!\s+(?:of|before|after)\b)"
)
def _trailing(m: re.Match[str], today: date) -> Found | None:
    unit = m["unit"].lower()
    if m["num"] is None and m.group(0).lower().startswith("the last"):
        return None  # a bare "the last week" is the calendar's, `_calendar` reads it
    high = _count(m["num"])[1] if m["num"] else 1
    return _found(m, (_moved(today, -high, unit), today), relative=True)


@_pattern(r"\b(?:at\s+)?this\s+time\s+last\s+(?P<unit>week|month|year)\b")
def _this_time_last(m: re.Match[str], today: date) -> Found | None:
    """The same moment one unit back, to the next finer grain: a year back to the month, a month back to
    the week, a week back to the day."""
    unit = m["unit"].lower()
    center = _moved(today, -1, unit)
    half = timedelta(days={"year": _HALF["month"], "month": _HALF["week"], "week": 0}[unit])
    return _found(m, (center - half, center + half), relative=True)


@_pattern(r"\b(?:over|during|on|at)\s+the\s+weekend\b")
def _the_weekend(m: re.Match[str], today: date) -> Found | None:
    """The weekend now under way, else the one just past."""
    return _found(m, calendar_span(today, "weekend", 0 if today.weekday() >= 5 else -1), relative=True)


@_pattern(r"\bthe\s+(?P<unit>week|weekend|month|year)\s+before\s+last\b")
def _before_last(m: re.Match[str], today: date) -> Found | None:
    return _found(m, calendar_span(today, m["unit"].lower(), -2), relative=True)


@_pattern(
    r"\b(?P<early>earlier\s+)?"
    + _MODE
    + r"\s+(?P<unit>week|weekend|month|year)\b(?!\s+(?:of|before|after)\b)"
)
def _calendar(m: re.Match[str], today: date) -> Found | None:
    words, unit = m["mode"].lower().split(), m["unit"].lower()
    if words[-1] == "past" and unit != "weekend":
        return _found(m, (_moved(today, -1, unit), today), relative=True)  # "the past week": 7 days back
    span = calendar_span(today, unit, {"last": -1, "next": 1, "": 0}[_mode(m) if _mode(m) != "this" else ""])
    if m["early"]:
        span = (span[0], min(span[1], today))
    return _found(m, span, relative=True)


@_pattern(
    r"\b(?:the\s+)?(?P<nth>first|second|third|fourth|last|1st|2nd|3rd|4th)\s+(?P<unit>week|weekend)\s+"
    r"(?:of|in)\s+" + FULL_MONTH + r"(?:,?\s+" + YEAR + r")?\b"
)
def _week_of_month(m: re.Match[str], today: date) -> Found | None:
    number = month(m["mon"])
    nth = {"first": 1, "1st": 1, "second": 2, "2nd": 2, "third": 3, "3rd": 3, "fourth": 4, "4th": 4}
    n = nth.get(m["nth"].lower(), -1)

    def annual(year: int) -> Span:
        if m["unit"].lower() == "weekend":
            saturday = nth_weekday(year, number, 5, n)
            return saturday, saturday + timedelta(days=1)
        first, last = month_span(year, number)
        if n < 0:
            return last - timedelta(days=6), last
        return first + timedelta(days=7 * (n - 1)), first + timedelta(days=7 * n - 1)

    return _annual(m, annual, today)


@_pattern(
    r"\b(?P<part>early|mid|late|the\s+(?:beginning|start|middle|end)\s+of)[\s-]+(?:"
    + FULL_MONTH
    + r"(?:,?\s+(?:of\s+)?"
    + YEAR
    + r")?|(?P<only>(?:1[89]|2[01])\d\d))\b"
)
def _part_of(m: re.Match[str], today: date) -> Found | None:
    word = m["part"].lower().split()
    third = {"early": 0, "beginning": 0, "start": 0, "mid": 1, "middle": 1, "late": 2, "end": 2}[
        word[1] if word[0] == "the" else word[0]
    ]
    if m["only"]:  # "early 2022": the first, middle or last four months
        year = int(m["only"])
        return _found(m, (date(year, 4 * third + 1, 1), month_span(year, 4 * third + 4)[1]))
    number = month(m["mon"])

    def annual(year: int) -> Span:
        first, last = month_span(year, number)
        return first.replace(day=(1, 11, 21)[third]), first.replace(day=(10, 20, last.day)[third])

    return _annual(m, annual, today)


def _may_the_verb(m: re.Match[str]) -> bool:
    """A lower-case "may" is the verb unless a year follows it ("may 5 people ..." is not 5 May)."""
    return m["mon"] == "may" and not m.groupdict().get("year")


@_pattern(
    r"\b" + MONTH + r"\s+" + DAY + r"(?!\d)(?!\s*(?::|%|am\b|pm\b|[ap]\.m\.))(?:(?:,\s*|\s+)" + YEAR + r")?\b"
)
def _month_day(m: re.Match[str], today: date) -> Found | None:
    number, day = month(m["mon"]), int(m["day"])
    if not 1 <= day <= 31 or _may_the_verb(m):
        return None
    return _annual(m, one_day(lambda y: date(y, number, day)), today)


@_pattern(r"\b(?:the\s+)?" + DAY + r"\s+(?:of\s+)?" + MONTH + r"(?:,?\s+" + YEAR + r")?\b")
def _day_month(m: re.Match[str], today: date) -> Found | None:
    number, day = month(m["mon"]), int(m["day"])
    if not 1 <= day <= 31 or _may_the_verb(m):
        return None
    return _annual(m, one_day(lambda y: date(y, number, day)), today)


@_pattern(r"\b" + MONTH + r"(?:\s+of)?,?\s+" + YEAR + r"\b")
def _month_year(m: re.Match[str], today: date) -> Found | None:
    return _found(m, month_span(int(m["year"]), month(m["mon"])))


@_pattern(
    r"\b(?:(?P<cue>the\s+month\s+of|of|in|during|throughout|until|till|by|from|through|around|before|after"
    r"|since|to|and)\s+|" + _MODE + r"\s+)" + FULL_MONTH + r"\b"
)
def _month_named(m: re.Match[str], today: date) -> Found | None:
    cue = (m["cue"] or m["mode"]).lower()
    if m["mon"][0].islower() and cue in (
        "to",
        "and",
        "this",
        "by",
        "of",
        "from",
        "before",
        "after",
        "around",
    ):
        return None  # "this may be", "and may": the verb; "to june": a name. Capitalised, they are months.
    number = month(m["mon"])
    return _annual(m, lambda y: month_span(y, number), today, _mode(m))


@_pattern(
    r"\b(?:" + _MODE + r"\s+|(?P<cue>in|during|over|throughout|since|of)\s+(?:the\s+)?|the\s+)?"
    r"(?P<season>spring|summer|autumn|fall|winter)(?:\s+(?:of\s+)?" + YEAR + r")?\b"
)
def _season(m: re.Match[str], today: date) -> Found | None:
    if not (m["mode"] or m["year"] or m["cue"]):
        return None  # a bare "spring" or "fall" is as often a noun or a verb
    return _annual(m, SEASONS[m["season"].lower()], today, _mode(m))


@_pattern(r"\b(?:" + _MODE + r"\s+)?" + _HOLIDAY + r"(?:\s+" + YEAR + r")?(?!\w)")
def _holiday(m: re.Match[str], today: date) -> Found | None:
    return _annual(m, HOLIDAYS[m["hol"].lower()], today, _mode(m))


@_pattern(r"\b(?:" + _MODE + r"\s+|on\s+(?:the\s+)?|that\s+)?" + _WEEKDAY + r"\b")
def _weekday(m: re.Match[str], today: date) -> Found | None:
    weekday = WEEKDAYS.index(m["wd"].lower())
    mode = _mode(m)
    if mode == "this":
        day = week_start(today) + timedelta(days=weekday)
    elif mode == "next":
        day = today + timedelta(days=(weekday - today.weekday() - 1) % 7 + 1)
    else:  # the most recent one before today
        day = today - timedelta(days=(today.weekday() - weekday - 1) % 7 + 1)
    return _found(m, (day, day), weekday=None if mode else weekday, relative=True)


@_pattern(r"(?<![\w/.-])" + ISO.pattern)
def _iso(m: re.Match[str], today: date) -> Found | None:
    day = to_date(m["y"], m["m"], m["d"])
    return _found(m, (day, day)) if day else None


@_pattern(YEAR_LAST.pattern)
def _numeric(m: re.Match[str], today: date) -> Found | None:
    return _found(m, *((d, d) for d in year_last(m)))  # both readings when both are dates


@_pattern(
    r"\b(?:(?P<part>early|mid|late)[\s-]+|(?:in|during|since|of|from|until|till|by|around|before|after"
    r"|throughout|back\s+in|year|to|and|between)\s+)" + YEAR + r"\b(?!\s*(?:%|[-/.]\d))"
)
def _year(m: re.Match[str], today: date) -> Found | None:
    year = int(m["year"])
    return _found(m, (date(year, 1, 1), date(year, 12, 31)))


@_pattern(
    r"\b(?P<word>recently|lately|these\s+days|not\s+long\s+ago|the\s+other\s+day|a\s+while\s+(?:ago|back))\b"
)
def _vague(m: re.Match[str], today: date) -> Found | None:
    word = " ".join(m["word"].lower().split())
    if word == "the other day":
        return _found(m, (today - timedelta(days=7), today - timedelta(days=1)), relative=True)
    if word.startswith("a while"):
        return _found(m, (add_months(today, -6), today - timedelta(days=14)), relative=True)
    return _found(m, (add_months(today, -1), today), relative=True)  # recently, lately: the past month


def _count(num: str) -> tuple[int, int]:
    words = num.lower().split()
    for vague, bounds in _VAGUE.items():
        if vague in words:
            return bounds
    word = words[0]
    return (int(word), int(word)) if word.isdigit() else (_NUMBER_WORDS[word], _NUMBER_WORDS[word])


_UNIT_DAYS = {"day": 1, "week": 7, "fortnight": 14}
_HALF = {"day": 0, "week": 3, "fortnight": 7, "month": 15, "year": 182}  # half a unit, in days


def _moved(today: date, count: int, unit: str) -> date:
    """`today` moved by `count` units (negative: back). Months and years move on the calendar."""
    if unit in ("month", "year"):
        return add_months(today, count * (12 if unit == "year" else 1))
    return today + timedelta(days=count * _UNIT_DAYS[unit])


# ---- phrases read together ------------------------------------------------------------------------------

_RELATIVE_TO = re.compile(
    r"\b(?:the\s+)?(?P<what>day|week|weekend|" + "|".join(WEEKDAYS) + r")\s+(?P<rel>before|after|of)\s+$",
    re.IGNORECASE,
)
_SINCE = re.compile(r"\bsince\s+(?:the\s+)?$", re.IGNORECASE)
_RANGE_OPEN = re.compile(r"\b(?:between|from)\s+(?:the\s+)?$", re.IGNORECASE)
_RANGE_JOIN = re.compile(r"^\s*(?:and|to|until|till|through|-)\s+(?:the\s+)?$", re.IGNORECASE)
_BESIDE = re.compile(r"^\s*(?:,|of|from|in|on|during)?\s*(?:the\s+)?$", re.IGNORECASE)


def _refine(text: str, today: date, found: list[Found]) -> list[Found]:
    """Apply what neighbouring words say: ranges, "since", "the week before X", a weekday inside a window."""
    out: list[Found] = []
    for f in _join_ranges(text, found):
        before = text[max(0, f.at[0] - 40) : f.at[0]]
        if (m := _RELATIVE_TO.search(before)) is not None and not f.relative:
            f = _relative_to(f, m["what"].lower(), m["rel"].lower(), f.at[0] - len(before) + m.start())
        elif _SINCE.search(before) or text[f.at[0] : f.at[1]].lower().startswith("since "):
            f = replace(f, spans=tuple((s, max(e, today)) for s, e in f.spans))
        out.append(f)
    # A phrase a neighbour swallowed ("Friday" in "the Friday before 15 July") is no window of its own.
    out = [f for f in out if not any(g is not f and g.at[0] <= f.at[0] and f.at[1] <= g.at[1] for g in out)]
    return _narrow_weekdays(text, out)


def _join_ranges(text: str, found: list[Found]) -> Iterator[Found]:
    """ "between August 11 and August 15 2023", "from July to October": one window from the first to the
    second (a yearless first end takes the second's year)."""
    i = 0
    while i < len(found):
        first = found[i]
        second = found[i + 1] if i + 1 < len(found) else None
        if second is not None and len(first.spans) == len(second.spans) == 1 and _joined(text, first, second):
            start, end = first.spans[0][0], second.spans[0][1]
            if first.annual is not None and not first.has_year and second.has_year:
                start = first.annual(second.spans[0][0].year)[0]
            if start <= end:
                yield Found((first.at[0], second.at[1]), ((start, end),))
                i += 2
                continue
        yield first
        i += 1


def _joined(text: str, first: Found, second: Found) -> bool:
    """Whether two phrases are the ends of a range; the words "from" and "to" may sit inside the phrases
    ("from July" "to October") or between them."""
    opened = _RANGE_OPEN.search(text[max(0, first.at[0] - 20) : first.at[0]]) or re.match(
        r"(?:between|from)\s", text[first.at[0] : first.at[1]], re.IGNORECASE
    )
    gap = text[first.at[1] : second.at[0]]
    joint = _RANGE_JOIN.match(gap) or (
        not gap.strip()
        and re.match(r"(?:and|to|until|till|through)\s", text[second.at[0] : second.at[1]], re.I)
    )
    return bool(opened and joint)


def _relative_to(f: Found, what: str, rel: str, start: int) -> Found:
    """ "the week before X", "the Friday before X", "the day after X", "the week of X"."""
    first, last = f.spans[0][0], f.spans[-1][1]
    one = timedelta(days=1)
    if rel == "of":
        span = calendar_span(first, "weekend" if what == "weekend" else "week", 0)
    elif what == "day":
        span = (first - one, first - one) if rel == "before" else (last + one, last + one)
    elif what == "week":
        span = (first - 7 * one, first - one) if rel == "before" else (last + one, last + 7 * one)
    elif rel == "before":  # the last such day (for a weekend, its Sunday) strictly before X
        weekday = 6 if what == "weekend" else WEEKDAYS.index(what)
        day = first - ((first.weekday() - weekday - 1) % 7 + 1) * one
        span = (day - one if what == "weekend" else day, day)
    else:  # the first such day (for a weekend, its Saturday) strictly after X
        weekday = 5 if what == "weekend" else WEEKDAYS.index(what)
        day = last + ((weekday - last.weekday() - 1) % 7 + 1) * one
        span = (day, day + one if what == "weekend" else day)
    return Found((start, f.at[1]), (span,))


def _narrow_weekdays(text: str, found: list[Found]) -> list[Found]:
    """A bare weekday beside another window ("the Wednesday two months ago", "on Friday last week") names
    that weekday's days inside the window; the two phrases become one."""
    out = list(found)
    for i, f in enumerate(found):
        if f.weekday is None:
            continue
        for j in (i + 1, i - 1):
            other = found[j] if 0 <= j < len(found) else None
            if other is None or other.weekday is not None or other not in out or f not in out:
                continue
            gap = text[f.at[1] : other.at[0]] if j > i else text[other.at[1] : f.at[0]]
            days = tuple((d, d) for s, e in other.spans for d in _days(s, e) if d.weekday() == f.weekday)
            if _BESIDE.match(gap) and 0 < len(days) <= 60:
                merged = Found((min(f.at[0], other.at[0]), max(f.at[1], other.at[1])), days)
                out = [merged if g is other else g for g in out if g is not f]
                break
    return out


def _days(start: date, end: date) -> Iterator[date]:
    for offset in range(min((end - start).days, 400) + 1):
        yield start + timedelta(days=offset)
