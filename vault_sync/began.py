"""When a note began: the date its frontmatter gives, and the earliest time its file vouches for.

`engrama_search(as_of=...)` and `engrama_context(as_of=...)` answer with what was known on a day, so every
note needs a start. The best evidence, in order (the store combines them, `nodes_sql.note_start`):

1. `valid_from:` — the person said when the fact holds (parse.py takes it);
2. a date key that note templates write: `date`, `created`, `created_at`, `date created`, ... (`frontmatter_began`),
   read leniently (ISO dates and date-times, `2020/05/01`, `May 1, 2020`, a daily-note link `[[2020-05-01]]`);
   a value that is not a date is ignored and stays a plain property;
3. the file: its creation time where the platform records one, else its modification time (`file_began`),
   together with the moment engrama first saw the note.

Numeric dates that could be read two ways (`01/05/2020`) are not evidence and are ignored.
"""

from __future__ import annotations

import os
import re
import uuid
from collections.abc import Mapping
from datetime import UTC, date, datetime, timedelta
from typing import Any

# Keys of the note's start, compared without case, spaces, `_` or `-` (`Date Created`, `created_at`, `createdAt`).
BEGAN_KEYS = frozenset({"date", "created", "createdat", "createdon", "datecreated", "creationdate"})
# A file time before this is a tool's placeholder (reproducible builds and some unzippers stamp 1970), not
# evidence of when a person wrote the note.
EARLIEST_FILE_TIME = datetime(1980, 1, 1, tzinfo=UTC).timestamp()
STAMP = "%Y-%m-%dT%H:%M:%SZ"  # the store's timestamp form (server/store/clock.py)

_KEY_NOISE = re.compile(r"[\s_\-]+")
_NUMERIC = re.compile(
    r"(?P<y>\d{4})[-/.](?P<m>\d{1,2})[-/.](?P<d>\d{1,2})"
    r"(?:[T ]\s*(?P<H>\d{1,2}):(?P<M>\d{2})(?::(?P<S>\d{2})(?:[.,]\d+)?)?\s*(?P<ampm>[ap]\.?m\.?)?"
    r"\s*(?P<zone>Z|[+-]\d{2}:?\d{2}(?::\d{2}(?:\.\d+)?)?)?)?",
    re.IGNORECASE,
)
_MONTHS = {
    name: number
    for number, names in enumerate(
        [
            ("january", "jan"),
            ("february", "feb"),
            ("march", "mar"),
            ("april", "apr"),
            ("may",),
            ("june", "jun"),
            ("july", "jul"),
            ("august", "aug"),
            ("september", "sep", "sept"),
            ("october", "oct"),
            ("november", "nov"),
            ("december", "dec"),
        ],
        start=1,
    )
    for name in names
}
_MONTH = "(?P<month>" + "|".join(sorted(_MONTHS, key=len, reverse=True)) + r")\.?"
_DAY = r"(?P<day>\d{1,2})(?:st|nd|rd|th)?"
_WORDY = [
    re.compile(rf"{_MONTH}\s+{_DAY},?\s+(?P<year>\d{{4}})", re.IGNORECASE),  # May 1, 2020
    re.compile(rf"{_DAY}\s+{_MONTH},?\s+(?P<year>\d{{4}})", re.IGNORECASE),  # 1 May 2020
]
_WEEKDAY = re.compile(r"^(?:mon|tue|wed|thu|fri|sat|sun)[a-z]*\.?,?\s+", re.IGNORECASE)


def frontmatter_began(properties: Mapping[str, Any]) -> str | None:
    """The earliest date among the note's start keys (`BEGAN_KEYS`), in the store's form, or None."""
    found = [
        moment
        for key, value in properties.items()
        if _KEY_NOISE.sub("", str(key).casefold()) in BEGAN_KEYS and (moment := lenient_moment(value))
    ]
    return min(found, key=_sort_key) if found else None


def lenient_moment(value: Any) -> str | None:
    """A date (`YYYY-MM-DD`) or a UTC date-time (`YYYY-MM-DDTHH:MM:SSZ`) read from a frontmatter value, or None.

    Accepts what YAML and note templates produce: ISO dates and date-times (a zone is honoured, none means
    UTC), `/` or `.` as separators, a trailing weekday or other words, English month names, and a wikilink to a
    daily note. A time that is not one (`25:00`) leaves the date alone."""
    text = _unwrap(value)
    if text is None:
        return None
    text = _WEEKDAY.sub("", text.strip().strip("\"'").strip())
    if (match := _NUMERIC.match(text)) is not None and not _digit_follows(text, match.end()):
        return _numeric(match)
    for pattern in _WORDY:
        if (match := pattern.match(text)) is not None and not _digit_follows(text, match.end()):
            return _checked_date(int(match["year"]), _MONTHS[match["month"].casefold()], int(match["day"]))
    return None


def file_began(stat: os.stat_result) -> str | None:
    """The earliest moment a file's times vouch for: its creation time (macOS, BSD, Windows) or its
    modification time, whichever is earlier; None when neither is a plausible time.

    A note cannot have begun after its last change, so the modification time bounds the start even where
    the creation time is unknown (Linux) or later (a sync tool that re-created the file)."""
    times = [stat.st_mtime]
    birth = getattr(stat, "st_birthtime", None)
    if birth is None and os.name == "nt":
        birth = stat.st_ctime  # Windows before Python 3.12: st_ctime is the creation time
    if isinstance(birth, int | float) and birth > 0:
        times.append(birth)
    plausible = [t for t in times if t >= EARLIEST_FILE_TIME]
    if not plausible:
        return None
    return datetime.fromtimestamp(min(plausible), UTC).strftime(STAMP)


def id_began(engrama_id: str | None) -> str | None:
    """The time stamped in an engrama_id that engrama minted (a UUIDv7, `identify.new_engrama_id`), or None.

    Ids are stamped with when their note began as its file showed at the time, so that evidence survives the
    id line's own write (which gives the file new times) and a database rebuilt from the vault."""
    try:
        value = uuid.UUID(str(engrama_id))
    except ValueError:
        return None
    if value.version != 7 or value.variant != uuid.RFC_4122:
        return None
    return datetime.fromtimestamp((value.int >> 80) / 1000, UTC).strftime(STAMP)


def moment_ms(moment: str | None) -> int | None:
    """Milliseconds since the Unix epoch of a date or date-time in the store's form (None when it is not one)."""
    if not moment:
        return None
    try:
        parsed = datetime.fromisoformat(_sort_key(moment).replace("Z", "+00:00"))
    except ValueError:
        return None
    return int(parsed.timestamp() * 1000)


def earliest(*moments: str | None) -> str | None:
    """The earliest of the given dates / date-times in the store's form (a date counts as its first moment)."""
    present = [m for m in moments if m]
    return min(present, key=_sort_key) if present else None


def _sort_key(moment: str) -> str:
    # "2020-05-01" sorts before "2020-05-01T00:00:00Z" as plain strings too; the key only makes it explicit.
    return moment if len(moment) > 10 else moment + "T00:00:00Z"


def _unwrap(value: Any) -> str | None:
    """The text of a value: a string, a date YAML produced, or a `[[daily note]]` link in any of its forms."""
    for _ in range(3):  # YAML reads an unquoted [[2020-05-01]] as a list holding a list
        if isinstance(value, list | tuple) and len(value) == 1:
            value = value[0]
    if isinstance(value, datetime | date):
        value = value.isoformat()
    if not isinstance(value, str):
        return None  # numbers (a bare year, an epoch) are not taken as dates
    text = value.strip()
    if text.startswith("[[") and text.endswith("]]"):
        text = text[2:-2].split("|", 1)[0].split("#", 1)[0].rsplit("/", 1)[-1]
    return text or None


def _digit_follows(text: str, end: int) -> bool:
    """True when the match stops inside a number (`2020-05-0123`): then it was not a date."""
    return end < len(text) and text[end].isdigit()


def _numeric(match: re.Match[str]) -> str | None:
    day = _checked_date(int(match["y"]), int(match["m"]), int(match["d"]))
    if day is None or match["H"] is None:
        return day
    hour, minute, second = int(match["H"]), int(match["M"]), int(match["S"] or 0)
    if match["ampm"]:
        if hour > 12:
            return day  # "13:00 pm" is not a time; the date still is
        hour = hour % 12 + (12 if match["ampm"][0].lower() == "p" else 0)
    if hour > 23 or minute > 59 or second > 59:
        return day
    moment = datetime.fromisoformat(day).replace(hour=hour, minute=minute, second=second)
    if match["zone"] and match["zone"].upper() != "Z":
        offset = _zone_offset(match["zone"])
        if offset is None:
            return day  # not a zone; the date still is one
        try:
            moment = (moment - offset).replace(tzinfo=None)
        except OverflowError:  # the first or last day of the calendar, moved across midnight
            return day
    return moment.strftime(STAMP)


def _zone_offset(zone: str) -> timedelta | None:
    """`+02:00`, `-0530` or `+00:09:21` (an old local mean time) as a UTC offset; None when it is not one."""
    sign = 1 if zone[0] == "+" else -1
    parts = zone[1:].split(":") if ":" in zone else [zone[1:3], zone[3:5]]
    offset = timedelta(
        hours=int(parts[0]), minutes=int(parts[1]), seconds=float(parts[2]) if parts[2:] else 0
    )
    return sign * offset if offset < timedelta(hours=24) else None


def _checked_date(year: int, month: int, day: int) -> str | None:
    try:
        return date(year, month, day).isoformat()
    except ValueError:
        return None
