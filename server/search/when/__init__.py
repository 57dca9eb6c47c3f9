"""Time words in a question, resolved against a reference time (issue 13, item 5: the Athena seed's routing).

`resolve(query, reference)` finds the date expressions of a question ("last Saturday", "two weeks ago",
"in May", "the Wednesday two months ago", "2023-05-05", "last Christmas") and turns each into a window of
dates, inclusive, with the phrase it came from. It also recognises questions about the *order* of two events
("which came first, X or Y", "did I X before Y") and about a *duration* ("how many days between X and Y",
"how long ago did I X") and returns the events as sub-queries, so search can retrieve every one of them.
`fit(note_date, window)` says how well a note's date agrees with a window. `title_date` reads the date a
note's title or file name carries. Pure and stdlib-only: no I/O, no clock (the reference is always given),
and no input makes it raise.

How phrases become windows (each choice is the plain reading of English, not fitted to any data):
- A precise phrase is rounded to its own grain: "3 days ago" is that day, "2 weeks ago" the 7 days centred
  14 days back, "2 months ago" a month centred there. Vague counts are ranges ("a couple" 2-3, "a few" 2-4,
  "several" 3-7) and a hedge ("about", "around") doubles the rounding, so a vague phrase gets a wider
  window. "Recently" / "lately" is the past month, "the other day" 1-7 days back, "this time last year" the
  month around the same day a year back (one grain finer than the unit).
- Calendar words follow the calendar: "last week" is the Monday-Sunday week before the reference's (ISO
  weeks), "last weekend" that week's Saturday and Sunday ("over the weekend": the one under way, else that
  one), "last month" / "last year" the previous calendar ones; "in/during/over the past N days" and "the
  past week" run back from the reference.
- A weekday ("on Tuesday", "last Tuesday") is the most recent one before the reference's day; "this" is the
  one in the reference's week, "next" the first after it. Beside another window ("the Wednesday two months
  ago", "on Friday last week") it names the days of that weekday inside that window.
- A month, season or holiday without a year is its most recent occurrence that began on or before the
  reference ("in May" asked on 30 May is this May); with "last", the most recent that had ended ("last May"
  asked in May is a year back); with "next", the first one after. Seasons are the meteorological ones of the
  northern hemisphere (summer is June-August); a winter belongs to the year of its December.
- Numeric dates: year first (2023-05-05, 2023/05/05) is unambiguous. Year last (05/06/2023) is read both ways
  when both are valid dates, giving two windows: a question carries no locale, the machine's locale says
  nothing about how the person writes, and a wrong single guess would favour the wrong month. When one
  reading is impossible (13/05/2023) the other is taken. Dates without a year and with only numbers ("5/6")
  are not read: they are as often fractions or scores.
- "since X" runs from X to the reference; "between X and Y" / "from X to Y" join two dates into one window;
  "the week/day/Friday before X" and "the week of X" move from X.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date, datetime

from server.search.when import events, phrases
from server.search.when.dates import Annual, Span, parse_reference, plain, title_date
from server.search.when.events import Kind

__all__ = ["Kind", "TimeIntent", "Window", "fit", "parse_reference", "resolve", "title_date"]


@dataclass(frozen=True)
class Window:
    """Dates from `start` to `end`, both included, and the words of the question that named them."""

    start: date
    end: date
    phrase: str
    # For a yearly thing named without a year ("in June", "at Christmas"): its occurrence in any year. The
    # window above is the most recent one; the question may be about another year ("When did we go camping
    # in June?" asks which June), so a note fits as well as it fits that thing's nearest occurrence.
    annual: Annual | None = field(default=None, compare=False)

    @property
    def days(self) -> int:
        return (self.end - self.start).days + 1


@dataclass(frozen=True)
class TimeIntent:
    """What a question says about time.

    `kind` is "order" (which of several events came first), "duration" (how long between events, or since
    one) or "window" (the question is about a time the windows name). `events` holds, for order and
    duration questions, each event as a sub-query ("buy the blender", "buy the espresso machine"). `relation`
    says how the events relate when the question says so: "first" (which came first), "before"/"after" (one
    event relative to another), "between", "since", "ago" or "took" (how long something took)."""

    kind: Kind
    windows: tuple[Window, ...] = ()
    events: tuple[str, ...] = ()
    relation: str | None = None

    def fit(self, note_date: date) -> float:
        """The best `fit` of `note_date` over the windows; 0.0 when the question names no window."""
        return max((fit(note_date, w) for w in self.windows), default=0.0)


def fit(note_date: date, window: Window | Span) -> float:
    """How well a note dated `note_date` agrees with `window`, in 0..1.

    1 inside the window. Outside, with `d` the days to the nearer edge and `h` a quarter of the window's
    length (at least one day), the fit is `1 / (1 + (d / h) ** 2)`: a half at `h`, a fifth at `2h`.
    Why this shape:
    - The tolerance scales with the window because the edges of a stated period are as uncertain as the
      period is long: people's errors in placing events in time grow in proportion to the span they name
      (the scalar property of time estimation, where the spread is a roughly constant fraction, about a
      quarter, of the interval). So a one-day window forgives a day or two, a month a week or two, a year a
      season.
    - The tail is heavy (it never reaches 0) because a note's date is itself uncertain evidence: a session
      written up days later, a note dated by its file's time. A far note should lose ground, not vanish.
    - The minimum of one day: notes are dated to the day, and a note about an evening is often written the
      next morning.
    """
    if isinstance(window, Window) and window.annual is not None:
        years = (note_date.year - 1, note_date.year, note_date.year + 1)
        return max(_fit_span(note_date, window.annual(year)) for year in years)
    return _fit_span(note_date, (window.start, window.end) if isinstance(window, Window) else window)


def _fit_span(note_date: date, span: Span) -> float:
    start, end = span
    if start <= note_date <= end:
        return 1.0
    distance = (start - note_date).days if note_date < start else (note_date - end).days
    half = max(1.0, ((end - start).days + 1) / 4)
    return 1.0 / (1.0 + (distance / half) ** 2)


def resolve(query: str, reference: datetime | date) -> TimeIntent | None:
    """The time intent of `query` asked at `reference` (its date is "today"), or None when it has none."""
    try:
        return _resolve(query, reference)
    except (ValueError, OverflowError, IndexError):  # a window past year 1 or 9999, or a malformed number
        return None


def _resolve(query: str, reference: datetime | date) -> TimeIntent | None:
    today = reference.date() if isinstance(reference, datetime) else reference
    text = plain(query)
    found = phrases.find(text, today)
    windows = tuple(
        Window(s, e, text[f.at[0] : f.at[1]].strip(), f.annual if f.recurring else None)
        for f in found
        for s, e in f.spans
    )
    question = events.asked(text, [f.at for f in found])
    if question is not None:
        kind, named, relation = question
        return TimeIntent(kind, windows, named, relation)
    return TimeIntent("window", windows) if windows else None
