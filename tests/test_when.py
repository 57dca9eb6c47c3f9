"""Time words in a question (issue 13, item 5): date windows against a fixed reference time, order and
duration questions and their events, the shape of `fit`, and the date each note of a real synced vault is
about. The reference is Tuesday 30 May 2023, 23:42, as LongMemEval writes it."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from server.runtime import Runtime, open_runtime
from server.search.when import TimeIntent, Window, fit, parse_reference, resolve, title_date
from server.settings import Settings
from server.store.nodes_sql import note_dates

REF = datetime(2023, 5, 30, 23, 42)  # a Tuesday
D = date.fromisoformat


def windows(question: str) -> list[tuple[str, str]]:
    intent = resolve(question, REF)
    assert intent is not None, question
    return [(w.start.isoformat(), w.end.isoformat()) for w in intent.windows]


def one(question: str) -> tuple[str, str]:
    found = windows(question)
    assert len(found) == 1, (question, found)
    return found[0]


def test_the_longmemeval_reference_format_and_others_parse() -> None:
    assert parse_reference("2023/05/30 (Tue) 23:42") == REF
    assert parse_reference("2023-05-30T23:42:00") == REF
    assert parse_reference("2023-05-30T23:42:00Z") == datetime(2023, 5, 30, 23, 42, tzinfo=UTC)
    assert parse_reference("1:56 pm on 8 May, 2023") == datetime(2023, 5, 8, 13, 56)
    assert parse_reference("12:05 am on 8 May, 2023") == datetime(2023, 5, 8, 0, 5)
    assert parse_reference("next Tuesday") is None and parse_reference("") is None


def test_days_named_by_words() -> None:
    assert one("what did I cook yesterday?") == ("2023-05-29", "2023-05-29")
    assert one("plans for tonight") == ("2023-05-30", "2023-05-30")
    assert one("what did I eat today") == ("2023-05-30", "2023-05-30")
    assert one("the day before yesterday") == ("2023-05-28", "2023-05-28")
    assert one("where did I go last night") == ("2023-05-29", "2023-05-29")
    windows_phrase = resolve("What did I cook yesterday?", REF)
    assert windows_phrase is not None and windows_phrase.windows[0].phrase == "yesterday"


def test_counts_ago_in_digits_and_words_round_to_their_unit() -> None:
    assert one("I bought it 3 days ago") == ("2023-05-27", "2023-05-27")
    assert one("two weeks ago") == ("2023-05-13", "2023-05-19")  # the 7 days centred 14 days back
    assert one("a week ago") == ("2023-05-20", "2023-05-26")
    assert one("two months ago") == ("2023-03-15", "2023-04-14")
    assert one("a year ago") == ("2021-11-29", "2022-11-28")  # half a year either side of 30 May 2022
    assert one("four weeks ago") == one("4 weeks ago")


def test_a_count_of_many_digits_is_read_whole() -> None:
    """Review 22d: "1000 days ago" was read as 000 days (its last three digits), "99999" as 999."""
    assert one("what did I do 1000 days ago?") == ("2020-09-02", "2020-09-02")
    assert one("12345 days ago") == ("1989-08-11", "1989-08-11")
    assert resolve("1,000 days ago", REF) is None  # not "000 days ago"
    assert resolve("99999 years ago", REF) is None  # before year 1: no window


def test_vague_counts_and_hedges_give_wider_windows_than_precise_ones() -> None:
    precise = Window(*map(D, one("two weeks ago")), phrase="")
    couple = Window(*map(D, one("a couple of weeks ago")), phrase="")
    few = Window(*map(D, one("a few weeks ago")), phrase="")
    hedged = Window(*map(D, one("about two weeks ago")), phrase="")
    recently = Window(*map(D, one("what did I read recently")), phrase="")
    assert precise.days < couple.days < few.days and precise.days < hedged.days
    assert couple.start <= precise.start and precise.end <= couple.end
    assert few == Window(D("2023-04-29"), D("2023-05-19"), "")  # 2 to 4 weeks back, half a week each side
    assert recently.end == REF.date() and recently.days > precise.days
    assert one("a few days ago") == ("2023-05-26", "2023-05-28")


def test_calendar_weeks_months_years_and_weekends() -> None:
    assert one("last week") == ("2023-05-22", "2023-05-28")  # Monday to Sunday before this week
    assert one("this week") == ("2023-05-29", "2023-06-04")
    assert one("next week") == ("2023-06-05", "2023-06-11")
    assert one("last weekend") == ("2023-05-27", "2023-05-28")
    assert one("this weekend") == ("2023-06-03", "2023-06-04")
    assert one("last month") == ("2023-04-01", "2023-04-30")
    assert one("this month") == ("2023-05-01", "2023-05-31")
    assert one("next year") == ("2024-01-01", "2024-12-31")
    assert one("the week before last") == ("2023-05-15", "2023-05-21")
    assert one("in the past 3 days") == ("2023-05-27", "2023-05-30")
    assert one("over the past month") == ("2023-04-30", "2023-05-30")
    assert one("earlier this week") == ("2023-05-29", "2023-05-30")
    assert one("over the weekend") == ("2023-05-27", "2023-05-28")
    assert one("this time last year") == ("2022-05-15", "2022-06-14")  # the month around 30 May 2022


def test_weekdays_are_the_most_recent_before_the_reference() -> None:
    assert one("what did I do last Saturday") == ("2023-05-27", "2023-05-27")
    assert one("on Tuesday") == ("2023-05-23", "2023-05-23")  # the reference is a Tuesday: a week back
    assert one("Monday evening") == ("2023-05-29", "2023-05-29")
    assert one("next Friday") == ("2023-06-02", "2023-06-02")
    assert one("on Friday last week") == ("2023-05-26", "2023-05-26")
    # A weekday beside a wider window names that weekday's days inside it.
    found = windows("What did I do with Rachel on the Wednesday two months ago?")
    assert found and all(D(s).weekday() == 2 and s == e for s, e in found)
    assert all("2023-03-15" <= s <= "2023-04-14" for s, _ in found)
    assert resolve("I go climbing on Saturdays", REF) is None  # a habit, not a day
    assert resolve("Turbocharged Tuesdays", REF) is None


def test_months_and_days_of_months() -> None:
    assert one("in May") == ("2023-05-01", "2023-05-31")  # the most recent May not after the reference
    assert one("in June") == ("2022-06-01", "2022-06-30")
    assert one("last May") == ("2022-05-01", "2022-05-31")
    assert one("May 2023") == ("2023-05-01", "2023-05-31")
    assert one("in March, 2022") == ("2022-03-01", "2022-03-31")
    assert one("May 5th") == one("5 May") == one("the 5th of May") == ("2023-05-05", "2023-05-05")
    assert one("on June 3rd") == ("2022-06-03", "2022-06-03")
    assert one("on 1 May, 2022") == ("2022-05-01", "2022-05-01")
    assert one("on December 1,2022") == one("December 1 2022") == ("2022-12-01", "2022-12-01")
    assert one("early August, 2023") == ("2023-08-01", "2023-08-10")
    assert one("the last week of September 2023") == ("2023-09-24", "2023-09-30")
    assert one("the first weekend of August 2023") == ("2023-08-05", "2023-08-06")
    assert resolve("this may be a silly question", REF) is None
    assert resolve("I may have 5 of them", REF) is None


def test_seasons() -> None:
    assert one("last summer") == ("2022-06-01", "2022-08-31")
    assert one("during the spring") == ("2023-03-01", "2023-05-31")
    assert one("last winter") == ("2022-12-01", "2023-02-28")
    assert one("the summer of 2021") == ("2021-06-01", "2021-08-31")
    assert resolve("did the leaves fall", REF) is None


def test_numeric_dates_and_which_order_is_assumed() -> None:
    assert one("on 2023-05-05") == ("2023-05-05", "2023-05-05")
    assert one("on 2023/05/05") == ("2023-05-05", "2023-05-05")
    # Year last and both readings valid: both windows (a question carries no locale).
    assert windows("on 05/06/2023") == [("2023-05-06", "2023-05-06"), ("2023-06-05", "2023-06-05")]
    assert windows("on 13/05/2023") == [("2023-05-13", "2023-05-13")]  # only day-first is a date
    assert windows("on 05/05/2023") == [("2023-05-05", "2023-05-05")]
    assert resolve("I scored 5/6 on the quiz", REF) is None


def test_years_holidays_ranges_and_anchored_phrases() -> None:
    assert one("in 2022") == ("2022-01-01", "2022-12-31")
    assert one("since 2016") == ("2016-01-01", "2023-05-30")
    assert one("last Christmas") == ("2022-12-25", "2022-12-25")
    assert one("at New Year") == ("2022-12-31", "2023-01-01")
    assert one("on Valentine's day") == ("2023-02-14", "2023-02-14")
    assert one("on Valentine\u2019s Day") == ("2023-02-14", "2023-02-14")
    assert one("last Thanksgiving") == ("2022-11-24", "2022-11-27")
    assert one("at Easter") == ("2023-04-07", "2023-04-10")
    assert one("between August 11 and August 15 2022") == ("2022-08-11", "2022-08-15")
    assert one("from July to October") == ("2022-07-01", "2022-10-31")
    assert one("the week before 16 November 2022") == ("2022-11-09", "2022-11-15")
    assert one("the Friday before 15 July 2022") == ("2022-07-08", "2022-07-08")
    assert one("the weekend before 17 July 2022") == ("2022-07-09", "2022-07-10")
    assert one("the week of 23 August 2022") == ("2022-08-22", "2022-08-28")


def test_a_question_without_time_words_has_no_intent() -> None:
    for question in (
        "What is my cat's name?",
        "How long is my daily commute to work?",
        "When did Caroline go to the LGBTQ support group?",
        "Which restaurant do you recommend?",
        "How many hours did I spend on the sculpture?",
        "",
    ):
        assert resolve(question, REF) is None, question


def test_which_came_first_names_each_event_with_its_verb() -> None:
    intent = resolve("Which did I buy first, the blender or the espresso machine?", REF)
    assert intent == TimeIntent("order", (), ("buy the blender", "buy the espresso machine"), "first")
    intent = resolve("Which device did I set up first, the smart thermostat or the new router?", REF)
    assert intent is not None and intent.events == ("set up the smart thermostat", "set up the new router")
    intent = resolve(
        "Which trip did I take first, the one to Europe with family or the solo trip to Peru?", REF
    )
    assert intent is not None and intent.events[0] == "take the trip to Europe with family"
    intent = resolve(
        "Which event happened first, the purchase of the coffee maker or the mixer breaking?", REF
    )
    assert intent is not None and intent.events == ("the purchase of the coffee maker", "the mixer breaking")
    intent = resolve("Who became a parent first, Rachel or Alex?", REF)
    assert intent is not None and intent.events == ("Rachel became a parent", "Alex became a parent")
    intent = resolve("Who graduated first, second and third among Emma, Rachel and Alex?", REF)
    assert intent is not None and intent.events == ("Emma graduated", "Rachel graduated", "Alex graduated")
    intent = resolve("The gym or the pottery class: which came first?", REF)
    assert intent is not None and intent.kind == "order" and intent.events == ("The gym", "the pottery class")


def test_before_and_after_questions_name_both_events() -> None:
    intent = resolve("Did I buy the blender before the espresso machine?", REF)
    assert intent == TimeIntent("order", (), ("buy the blender", "buy the espresso machine"), "before")
    intent = resolve("Which city was John in before traveling to Chicago?", REF)
    assert intent is not None and intent.relation == "before" and intent.events[1] == "traveling to Chicago"
    assert resolve("What did I eat after work?", REF) is None  # a time of day, not an event
    # "the week before <date>" is a date, not an event to order against
    intent = resolve("Where was Tim in the week before 16 November 2022?", REF)
    assert intent is not None and intent.kind == "window"


def test_duration_questions_name_their_events() -> None:
    intent = resolve(
        "How many days passed between the day I started watering my herb garden and the day I harvested "
        "my first batch of fresh herbs?",
        REF,
    )
    assert intent is not None and intent.kind == "duration" and intent.relation == "between"
    assert intent.events == ("started watering my herb garden", "harvested my first batch of fresh herbs")
    intent = resolve("How many weeks passed between Maria adopting Coco and Shadow?", REF)
    assert intent is not None and intent.events == ("Maria adopting Coco", "Maria adopting Shadow")
    intent = resolve("How many days ago did I buy a smoker?", REF)
    assert intent == TimeIntent("duration", (), ("buy a smoker",), "ago")
    intent = resolve("How long after the move did I adopt the dog?", REF)
    assert intent is not None and intent.events == ("adopt the dog", "the move")
    intent = resolve("How many days before the 'Rack Fest' did I join the 'Turbo Tuesdays' event?", REF)
    assert intent is not None and intent.events == ("join the 'Turbo Tuesdays' event", "the 'Rack Fest'")
    intent = resolve("How many days had passed since I finished the book when I went to the reading?", REF)
    assert intent is not None and intent.events == ("finished the book", "went to the reading")
    assert intent.relation == "since"
    intent = resolve("How many days ago did I read the March 15th issue of the magazine?", REF)
    assert (
        intent is not None
        and intent.kind == "duration"
        and [w.phrase for w in intent.windows] == ["March 15th"]
    )


def test_fit_is_one_inside_and_falls_off_with_the_window_width() -> None:
    day = Window(D("2023-05-20"), D("2023-05-20"), "")
    month = Window(D("2023-04-01"), D("2023-04-30"), "")
    assert fit(D("2023-05-20"), day) == 1.0 and fit(D("2023-04-17"), month) == 1.0
    assert fit(D("2023-05-21"), day) == pytest.approx(0.5)  # a one-day window forgives a day...
    assert fit(D("2023-05-22"), day) == pytest.approx(0.2)  # ...less so two...
    assert fit(D("2023-05-27"), day) < 0.05  # ...and hardly a week
    assert fit(D("2023-05-07"), month) > 0.5 and fit(D("2023-05-14"), month) > 0.2  # a month: a week or two
    assert fit(D("2023-05-19"), day) == fit(D("2023-05-21"), day)  # the same on both sides
    # Distance counts in window widths: the same fraction of the width outside gives the same fit.
    week = Window(D("2023-05-01"), D("2023-05-28"), "")
    quarter = Window(D("2023-05-01"), D("2023-05-07"), "")
    assert fit(D("2023-06-25"), week) == pytest.approx(fit(D("2023-05-14"), quarter))
    distances = [fit(D("2023-05-20") + timedelta(days=d), day) for d in range(0, 400, 7)]
    assert distances == sorted(distances, reverse=True) and distances[-1] > 0.0
    intent = TimeIntent("window", (day, month))
    assert (
        intent.fit(D("2023-05-21")) == pytest.approx(0.5) and TimeIntent("order").fit(D("2023-05-21")) == 0.0
    )


def test_title_date_reads_titles_and_file_names() -> None:
    assert title_date("Session 3 — 1:56 pm on 8 May, 2023") == D("2023-05-08")
    assert title_date("Session 3 — 8 May 2023, 1:56 pm") == D("2023-05-08")
    assert title_date("Chat — 2023/05/30 (Tue) 23:42") == D("2023-05-30")
    assert title_date("2024-03-07 Standup") == D("2024-03-07")
    assert title_date("Journal/2024/03/07") == D("2024-03-07")
    assert title_date("202403071230 Zettel") == D("2024-03-07")
    assert title_date("Review May 8th, 2023") == D("2023-05-08")
    assert title_date("25-03-2024") == D("2024-03-25")  # only one reading is a date
    assert title_date("07-03-2024") is None  # 7 March or 3 July: not evidence
    assert title_date("Top 10 May ideas") is None and title_date("Budget 2023-2024") is None


TIME_WORDS = st.sampled_from(
    "yesterday today tonight ago last this next past week weekend month year Saturday Tuesday May June "
    "Christmas summer fall in on the a couple of few several two 3 2023 13/05/2023 2023-02-29 05/06/23 "
    "between and from to since before after first or which did I how many days long between , ? 9999 0001 "
    "the Friday before 31 December 9999 1 January 1800 early late mid".split(" ")
)


@settings(max_examples=300, deadline=None)
@given(
    text=st.one_of(st.text(max_size=200), st.lists(TIME_WORDS, max_size=25).map(" ".join)),
    reference=st.datetimes(),
)
def test_any_text_at_any_reference_never_raises_and_windows_are_ordered(
    text: str, reference: datetime
) -> None:
    intent = resolve(text, reference)
    if intent is not None:
        assert intent.kind in ("window", "order", "duration")
        assert all(w.start <= w.end and w.phrase for w in intent.windows)
        assert all(0.0 <= intent.fit(w.start) <= 1.0 for w in intent.windows)
    title_date(text)
    parse_reference(text)


@given(st.dates(), st.dates(), st.integers(min_value=0, max_value=2000))
def test_fit_stays_between_zero_and_one(a: date, b: date, offset: int) -> None:
    start, end = min(a, b), max(a, b)
    value = fit(start, (start, end))
    assert value == 1.0
    try:
        outside = end + timedelta(days=offset + 1)
    except OverflowError:
        return
    assert 0.0 < fit(outside, (start, end)) < 1.0


# ---- the date each note is about, on a real synced vault --------------------------------------------------


@pytest.fixture
async def rt(vault: Path, db_path: Path) -> AsyncIterator[Runtime]:
    async with open_runtime(Settings(vault=vault, db_path=db_path, watch=False)) as runtime:
        yield runtime


async def synced(rt: Runtime, vault: Path, rel: str, text: str, mtime: datetime | None = None) -> str:
    file = vault / rel
    file.parent.mkdir(parents=True, exist_ok=True)
    file.write_text(text, encoding="utf-8")
    if mtime is not None:
        os.utime(file, (mtime.timestamp(), mtime.timestamp()))
    outcome = await rt.require_sync().sync_path(rel)
    assert outcome.id is not None, outcome
    return outcome.id


async def test_note_dates_take_the_best_evidence_each_note_has(rt: Runtime, vault: Path) -> None:
    old = datetime(2020, 2, 2, 12, 0, tzinfo=UTC)
    ids = {
        "frontmatter": await synced(
            rt, vault, "Notes/Meeting.md", "---\ndate: 2022-11-05\n---\nPlanning 2023-01-01\n"
        ),
        "daily": await synced(rt, vault, "Daily/2024-03-07.md", "Standup notes.\n"),
        "daily titled": await synced(rt, vault, "Daily/2024-03-08 Standup.md", "Standup.\n"),
        "folders": await synced(rt, vault, "Journal/2024/03/09.md", "A day.\n"),
        "locomo title": await synced(
            rt, vault, "conv/session-03.md", '---\ntitle: "Session 3 — 1:56 pm on 8 May, 2023"\n---\nHi\n'
        ),
        "longmemeval": await synced(
            rt, vault, "chats/2023-05-20 02-21.md", '---\ntitle: "Chat — 2023/05/20 (Sat) 02:21"\n---\nHi\n'
        ),
        "title over created": await synced(
            rt, vault, "Notes/Trip.md", '---\ntitle: "Trip of 3 June 2021"\ncreated: 2021-06-10\n---\nSea.\n'
        ),
        "created": await synced(rt, vault, "Notes/Written.md", "---\ncreated: 2021-06-01\n---\nText.\n", old),
        "ambiguous name": await synced(rt, vault, "Notes/Call 03-04-2024.md", "Call.\n", old),
        "nothing": await synced(rt, vault, "Notes/Plain.md", "Nothing dated here.\n", old),
    }
    dated = await rt.store.read(note_dates, [*ids.values(), "no-such-id"])
    assert {what: dated[node].isoformat() for what, node in ids.items()} == {
        "frontmatter": "2022-11-05",
        "daily": "2024-03-07",
        "daily titled": "2024-03-08",
        "folders": "2024-03-09",
        "locomo title": "2023-05-08",
        "longmemeval": "2023-05-20",
        "title over created": "2021-06-03",
        "created": "2021-06-01",
        "ambiguous name": "2020-02-02",  # not a date either way: the file's time
        "nothing": "2020-02-02",
    }
    assert "no-such-id" not in dated


async def test_note_dates_of_many_notes_in_one_call(rt: Runtime, vault: Path) -> None:
    first = date(2022, 1, 1)
    for i in range(600):  # more ids than SQLite binds in one statement by default on old builds
        (vault / "Daily").mkdir(exist_ok=True)
        (vault / "Daily" / f"{first + timedelta(days=i)}.md").write_text(f"Day {i}.\n", encoding="utf-8")
    await rt.require_sync().sync_vault()
    paths = await rt.store.read(lambda conn: dict(conn.execute("select id, path from nodes").fetchall()))
    dated = await rt.store.read(note_dates, list(paths))
    assert len(dated) == 600
    assert all(dated[node].isoformat() == Path(path).stem for node, path in paths.items())


def test_a_month_named_without_a_year_fits_that_month_of_any_year() -> None:
    """ "When did we go camping in June?" asks which June: a June three years back fits as well as the last
    one, May does not; "last June" stays the most recent finished June."""
    asked = datetime(2026, 11, 23, 10, 0)
    intent = resolve("When did Melanie go camping in June?", asked)
    assert intent is not None
    assert intent.fit(date(2023, 6, 14)) == 1.0
    assert intent.fit(date(2026, 6, 2)) == 1.0
    assert intent.fit(date(2023, 3, 1)) < 0.1
    last = resolve("what did I do last June?", asked)
    assert last is not None and last.fit(date(2023, 6, 14)) < 0.1 and last.fit(date(2026, 6, 14)) == 1.0
