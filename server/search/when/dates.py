"""Dates written in text (a note's title, a question's reference time), and the calendar arithmetic the
time phrases need: months, weeks, and the yearly occasions (months, seasons, holidays) with their rules for
which occurrence a phrase means."""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import date, datetime, timedelta

Span = tuple[date, date]
Annual = Callable[[int], Span]  # the occurrence of a yearly thing (a month, a season, a holiday) in a year

MAX_TEXT = 4000  # characters read; time words sit in a question or a title, not in a pasted page

MONTHS = {
    "january": 1, "february": 2, "march": 3, "april": 4, "may": 5, "june": 6, "july": 7, "august": 8,
    "september": 9, "october": 10, "november": 11, "december": 12,
}  # fmt: skip
MONTH = (
    r"(?P<mon>jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?"
    r"|sep(?:t(?:ember)?)?|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)\.?"
)
FULL_MONTH = r"(?P<mon>january|february|march|april|may|june|july|august|september|october|november|december)"
DAY = r"(?P<day>[0-3]?\d)(?:st|nd|rd|th)?"
YEAR = r"(?P<year>(?:1[89]|2[01])\d\d)"  # 1800-2199: a four-digit number outside is not taken for a year
ISO = re.compile(r"(?<!\d)(?P<y>(?:1[89]|2[01])\d\d)[-/.](?P<m>[01]?\d)[-/.](?P<d>[0-3]?\d)(?!\d)")
YEAR_LAST = re.compile(
    r"(?<![\d/.-])(?P<a>[0-3]?\d)[-/.](?P<b>[0-3]?\d)[-/.](?P<y>(?:1[89]|2[01])\d\d|\d\d)(?![\d/])"
)
_STAMP = re.compile(r"^(?P<y>(?:19|20)\d\d)(?P<m>[01]\d)(?P<d>[0-3]\d)(?:(?:[0-2]\d[0-5]\d){1,2})?(?!\d)")
_MONTH_DAY_YEAR = re.compile(rf"\b{MONTH}\s+{DAY},?\s+{YEAR}\b", re.IGNORECASE)
_DAY_MONTH_YEAR = re.compile(rf"\b{DAY}\s+(?:of\s+)?{MONTH},?\s+{YEAR}\b", re.IGNORECASE)
_CLOCK = re.compile(
    r"\b(?P<h>[0-2]?\d):(?P<m>[0-5]\d)(?::(?P<s>[0-5]\d))?\s*(?P<ampm>[ap]\.?m\.?)?", re.IGNORECASE
)
_PLAIN = str.maketrans(
    {"\u2019": "'", "\u2018": "'", "\u00a0": " ", "\u2009": " ", "\u2013": "-", "\u2014": "-"}
)


def plain(text: str) -> str:
    """The text with typographic quotes, dashes and spaces made plain, character for character (so the
    positions of phrases stay those of the original)."""
    return text[:MAX_TEXT].translate(_PLAIN)


def title_date(text: str) -> date | None:
    """The first full date (with a year) in a note's title, file name or path, or None.

    Accepted: year-first numbers (`2024-03-07`, `2024/03/07`, `2024.03.07`, also as folders `2024/03/07`),
    a timestamp opening a file name (`20240307`, a Zettelkasten id `202403071230`), English month names with
    a year (`8 May 2023`, `8 May, 2023`, `May 8th, 2023`, `1:56 pm on 8 May, 2023`, `8th of May 2023`), and
    year-last numbers (`07-03-2024`, `07.03.2024`, `03/07/2024`) only when one reading is possible
    (`25-03-2024`) or both agree (`07-07-2024`): a note's date must be right, so where the order of day and
    month is unknown there is no date and the next evidence is used. A date without a year is not a note's
    date (there is no reference time to place it)."""
    text = plain(text)
    found: list[tuple[int, date | None]] = []
    if (m := _STAMP.match(text.rsplit("/", 1)[-1])) is not None:
        found.append((-1, to_date(m["y"], m["m"], m["d"])))
    found += [(m.start(), to_date(m["y"], m["m"], m["d"])) for m in ISO.finditer(text)]
    for pattern in (_MONTH_DAY_YEAR, _DAY_MONTH_YEAR):
        found += [(m.start(), to_date(m["year"], month(m["mon"]), m["day"])) for m in pattern.finditer(text)]
    for m in YEAR_LAST.finditer(text):
        readings = year_last(m)
        if len(readings) == 1:
            found.append((m.start(), readings[0]))
    dated = sorted((at, d) for at, d in found if d is not None)
    return dated[0][1] if dated else None


def parse_reference(text: str) -> datetime | None:
    """A question's reference time from text, or None: LongMemEval's `2023/05/30 (Tue) 23:42`, ISO 8601
    (`2023-05-30`, `2023-05-30T23:42:00Z`; a zone is kept), or a date with a month name and an optional
    clock time (`1:56 pm on 8 May, 2023`)."""
    text = text.strip()[:200]
    try:
        return datetime.fromisoformat(text)
    except ValueError:
        pass
    day = title_date(text)
    if day is None:
        return None
    midnight = datetime(day.year, day.month, day.day)
    clock = _CLOCK.search(text)
    if clock is None:
        return midnight
    hour, minute, second = int(clock["h"]), int(clock["m"]), int(clock["s"] or 0)
    if clock["ampm"]:
        if not 1 <= hour <= 12:
            return midnight  # "13:00 pm" is not a time; the date still is
        hour = hour % 12 + (12 if clock["ampm"][0].lower() == "p" else 0)
    return midnight.replace(hour=hour, minute=minute, second=second) if hour <= 23 else midnight


def month(name: str) -> int:
    """The number of a month from its name or abbreviation (`Sept.` -> 9)."""
    prefix = name.casefold().rstrip(".")[:3]
    return next(number for full, number in MONTHS.items() if full.startswith(prefix))


def to_date(year: str | int, month_: str | int, day: str | int) -> date | None:
    try:
        return date(int(year), int(month_), int(day))
    except ValueError:
        return None


def year_last(m: re.Match[str]) -> list[date]:
    """The readings of `05/06/2023` (month first, then day first) that are dates; a two-digit year is 20xx."""
    year = int(m["y"]) + (2000 if len(m["y"]) == 2 else 0)
    readings = (to_date(year, m["a"], m["b"]), to_date(year, m["b"], m["a"]))
    return list(dict.fromkeys(d for d in readings if d is not None))


# ---- calendar arithmetic ------------------------------------------------------------------------------


def add_months(day: date, months: int) -> date:
    """`day` moved by whole months on the calendar; the 31st becomes the month's last day when it must."""
    index = day.year * 12 + day.month - 1 + months
    year, zero_month = divmod(index, 12)
    return date(year, zero_month + 1, min(day.day, month_length(year, zero_month + 1)))


def month_length(year: int, month_: int) -> int:
    following = date(year + 1, 1, 1) if month_ == 12 else date(year, month_ + 1, 1)
    return (following - timedelta(days=1)).day


def month_span(year: int, month_: int) -> Span:
    return date(year, month_, 1), date(year, month_, month_length(year, month_))


def week_start(day: date) -> date:
    """The Monday of `day`'s week (ISO weeks run Monday to Sunday)."""
    return day - timedelta(days=day.weekday())


def calendar_span(today: date, unit: str, offset: int) -> Span:
    """The week, weekend, month or year `offset` units from the one holding `today` (-1: the last one)."""
    if unit in ("week", "weekend"):
        monday = week_start(today) + timedelta(days=7 * offset)
        if unit == "weekend":
            return monday + timedelta(days=5), monday + timedelta(days=6)
        return monday, monday + timedelta(days=6)
    if unit == "month":
        first = add_months(today.replace(day=1), offset)
        return month_span(first.year, first.month)
    return date(today.year + offset, 1, 1), date(today.year + offset, 12, 31)


def nth_weekday(year: int, month_: int, weekday: int, n: int) -> date:
    """The n-th (1-based; -1 the last) `weekday` (Monday 0) of a month."""
    if n > 0:
        first = date(year, month_, 1)
        return first + timedelta(days=(weekday - first.weekday()) % 7 + 7 * (n - 1))
    last = month_span(year, month_)[1]
    return last - timedelta(days=(last.weekday() - weekday) % 7)


def easter(year: int) -> date:
    """Western Easter Sunday (the anonymous Gregorian computus)."""
    a, b, c = year % 19, year // 100, year % 100
    d, e = divmod(b, 4)
    g = (8 * b + 13) // 25
    h = (19 * a + b - d - g + 15) % 30
    i, k = divmod(c, 4)
    ell = (32 + 2 * e + 2 * i - h - k) % 7
    m = (a + 11 * h + 19 * ell) // 433
    month_ = (h + ell - 7 * m + 90) // 25
    return date(year, month_, (h + ell - 7 * m + 33 * month_ + 19) % 32)


def occurrence(annual: Annual, today: date, mode: str) -> Span | None:
    """Which occurrence of a yearly thing a phrase means: "last" the most recent that had ended before
    today; "next" the first that starts after it; "this" the one holding today, else the one starting this
    year; no mode ("in May", "at Christmas") the most recent that began on or before today."""
    spans: list[Span] = []
    for year in range(today.year - 2, today.year + 3):
        try:
            spans.append(annual(year))
        except (ValueError, OverflowError):  # 29 February in a common year; the calendar's ends
            continue
    if mode == "last":
        return max((s for s in spans if s[1] < today), default=None)
    if mode == "next":
        return min((s for s in spans if s[0] > today), default=None)
    if mode == "this":
        inside = [s for s in spans if s[0] <= today <= s[1]]
        return inside[0] if inside else next((s for s in spans if s[0].year == today.year), None)
    return max((s for s in spans if s[0] <= today), default=None)


def one_day(day: Callable[[int], date]) -> Annual:
    return lambda y: (day(y), day(y))


# Meteorological seasons of the northern hemisphere (the data and most users we know of are there); a
# winter belongs to the year of its December.
SEASONS: dict[str, Annual] = {
    "spring": lambda y: (date(y, 3, 1), date(y, 5, 31)),
    "summer": lambda y: (date(y, 6, 1), date(y, 8, 31)),
    "autumn": lambda y: (date(y, 9, 1), date(y, 11, 30)),
    "fall": lambda y: (date(y, 9, 1), date(y, 11, 30)),
    "winter": lambda y: (date(y, 12, 1), month_span(y + 1, 2)[1]),
}
_JULY_4 = one_day(lambda y: date(y, 7, 4))
_LABOR_DAY = one_day(lambda y: nth_weekday(y, 9, 0, 1))
_VALENTINE = one_day(lambda y: date(y, 2, 14))
HOLIDAYS: dict[str, Annual] = {
    "christmas eve": one_day(lambda y: date(y, 12, 24)),
    "christmas": one_day(lambda y: date(y, 12, 25)),
    "xmas": one_day(lambda y: date(y, 12, 25)),
    "new year's eve": one_day(lambda y: date(y, 12, 31)),
    "new year's day": one_day(lambda y: date(y, 1, 1)),
    "new year's": lambda y: (date(y - 1, 12, 31), date(y, 1, 1)),
    "new year": lambda y: (date(y - 1, 12, 31), date(y, 1, 1)),
    "valentine's day": _VALENTINE,
    "valentines day": _VALENTINE,
    "valentine's": _VALENTINE,
    "st. patrick's day": one_day(lambda y: date(y, 3, 17)),
    "st patrick's day": one_day(lambda y: date(y, 3, 17)),
    "easter": lambda y: (easter(y) - timedelta(days=2), easter(y) + timedelta(days=1)),  # Good Friday-Monday
    "mother's day": one_day(lambda y: nth_weekday(y, 5, 6, 2)),  # the US date
    "memorial day": one_day(lambda y: nth_weekday(y, 5, 0, -1)),
    "father's day": one_day(lambda y: nth_weekday(y, 6, 6, 3)),
    "independence day": _JULY_4,
    "fourth of july": _JULY_4,
    "4th of july": _JULY_4,
    "labor day": _LABOR_DAY,
    "labour day": _LABOR_DAY,
    "halloween": one_day(lambda y: date(y, 10, 31)),
    # US Thanksgiving and the long weekend after it
    "thanksgiving": lambda y: (nth_weekday(y, 11, 3, 4), nth_weekday(y, 11, 3, 4) + timedelta(days=3)),
}
