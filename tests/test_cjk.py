"""Chinese, Japanese and Korean words are found inside sentences (review 22d: 寿司, 浅草寺 and 预算 found nothing,
though notes said 東京で寿司を食べました and 我们讨论了预算和招聘计划: a run of such characters was one token).
Real vaults and databases; the index rows stay exact through edits and an upgrade (migration 19)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from server.runtime import open_runtime
from server.search.service import search
from server.settings import Settings
from server.store import migrations, passages_sql, search_sql
from server.store.cjk import pairs, spaced
from server.store.database import connect_sync
from server.store.search_sql import NodeFilter

NOTES = {
    "Travel/東京旅行.md": "# 東京旅行\n\n東京で寿司を食べました。浅草寺を訪れました。様々な店と我々の日々。\n",
    "Work/会议.md": "我们讨论了预算和招聘计划。下周再开会。\n",
    "Work/회의.md": "오늘 예산 회의를 했습니다. 채용 계획도 논의했습니다.\n",
    "Work/Budget.md": "The budget review for the offsite; catering is the largest line.\n",
}


def write_notes(vault: Path) -> None:
    for rel, text in NOTES.items():
        path = vault / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")


def test_runs_of_cjk_characters_are_indexed_as_their_pairs_and_other_text_is_left_alone() -> None:
    assert pairs("寿司") == ["寿司"] and pairs("猫") == ["猫"]
    assert pairs("浅草寺") == ["浅草", "草寺"]
    assert spaced("python入門です") == "python 入門 門で です "
    assert spaced("The budget review, naïve café.") == "The budget review, naïve café."


async def test_cjk_words_find_the_notes_that_hold_them(vault: Path, db_path: Path) -> None:
    write_notes(vault)
    async with open_runtime(Settings(vault=vault, db_path=db_path, watch=False)) as rt:
        await rt.require_sync().sync_vault()

        async def found(query: str) -> list[str]:
            return [hit.name for hit in (await search(rt, query)).results]

        assert await found("寿司") == ["東京旅行"]
        assert await found("浅草寺") == ["東京旅行"]
        assert await found("東京") == ["東京旅行"]  # its title, and a word of its text
        assert await found("预算") == ["会议"]
        assert await found("招聘计划") == ["会议"]
        assert await found("예산") == ["회의"]
        assert await found("budget review") == ["Budget"]  # other text as before
        for word in ("様々", "我々", "日々"):  # the iteration mark is part of the word (review 22g)
            assert await found(word) == ["東京旅行"], word
        hits = (await search(rt, "寿司")).results
        assert "寿司を食べました" in hits[0].snippet  # snippets show the text as written


async def _scores(vault: Path, db: Path, queries: list[str]) -> list[Any]:
    async with open_runtime(Settings(vault=vault, db_path=db, watch=False)) as rt:
        await rt.require_sync().sync_vault()
        paths = dict(await rt.store.read(lambda c: c.execute("select id, path from nodes").fetchall()))
        found: list[Any] = []
        for query in queries:
            match = " OR ".join(f'"{w}"' for w in spaced(query).split())
            passages = await rt.store.read(search_sql.passage_hits, match, 20, NodeFilter())
            notes = await rt.store.read(search_sql.note_hits, match, 20, NodeFilter())
            found.append(sorted((paths[h.node_id], h.ordinal, round(h.score, 9)) for h in passages))
            found.append(sorted((paths[n], round(score, 9)) for n, score in notes))
        return found


async def test_edited_cjk_notes_leave_the_index_as_a_fresh_one_would_be(tmp_path: Path) -> None:
    """A row leaves the contentless indexes with exactly the tokens it went in with: after edits, bm25 scores
    equal those of a database built from the edited notes alone."""
    vault = tmp_path / "vault"
    vault.mkdir()
    write_notes(vault)
    queries = ["寿司", "东京 预算", "浅草寺", "예산 회의", "budget"]
    edited, fresh = tmp_path / "edited.db", tmp_path / "fresh.db"
    await _scores(vault, edited, queries)
    for round_ in range(3):
        for rel in ("Travel/東京旅行.md", "Work/会议.md", "Work/회의.md"):
            path = vault / rel
            path.write_text(path.read_text(encoding="utf-8") + f"第{round_}回の追記。预算又变了。\n", "utf-8")
        await _scores(vault, edited, queries)
    assert await _scores(vault, edited, queries) == await _scores(vault, fresh, queries)


async def test_a_database_indexed_before_migration_19_finds_cjk_words_after_the_upgrade(
    vault: Path, db_path: Path
) -> None:
    write_notes(vault)
    settings = Settings(vault=vault, db_path=db_path, watch=False)
    async with open_runtime(settings) as rt:
        await rt.require_sync().sync_vault()
    conn, _ = connect_sync(db_path)
    with conn:  # the rows as the version before migration 19 made them: each run of characters one token
        _as_before_migration_19(conn)
        conn.execute("delete from schema_migrations where number = 19")
    assert migrations.apply_migrations(conn) == 1
    conn.close()
    async with open_runtime(settings) as rt:
        assert [hit.name for hit in (await search(rt, "寿司")).results] == ["東京旅行"]
        assert [hit.name for hit in (await search(rt, "budget review")).results] == ["Budget"]
    assert await _scores(vault, db_path, ["寿司", "预算", "budget"]) == await _scores(
        vault, db_path.with_name("fresh.db"), ["寿司", "预算", "budget"]
    )


def _as_before_migration_19(conn: Any) -> None:
    ids = [r[0] for r in conn.execute("select node_id from note_docs")]
    texts = passages_sql.passages_by_note(conn, ids)
    for chunk_id, node_id, ordinal, title, heading in conn.execute(
        "select id, node_id, ordinal, title, heading from chunks"
    ).fetchall():
        text = texts[node_id][ordinal]
        conn.execute(
            "insert into chunks_fts (chunks_fts, rowid, title, heading, text) values ('delete', ?, ?, ?, ?)",
            (chunk_id, spaced(title), spaced(heading), spaced(text)),
        )
        conn.execute(
            "insert into chunks_fts (rowid, title, heading, text) values (?, ?, ?, ?)",
            (chunk_id, title, heading, text),
        )
    bodies = passages_sql.stored_note_texts(conn, ids)
    for doc, node_id, name in conn.execute("select doc, node_id, name from note_docs").fetchall():
        conn.execute(
            "insert into notes_fts (notes_fts, rowid, name, body) values ('delete', ?, ?, ?)",
            (doc, spaced(name), spaced(bodies[node_id])),
        )
        conn.execute(
            "insert into notes_fts (rowid, name, body) values (?, ?, ?)", (doc, name, bodies[node_id])
        )


async def test_a_cjk_name_as_the_whole_question_is_first_and_inside_a_question_anchors_its_note(
    vault: Path, db_path: Path
) -> None:
    """Review 22g: 東京 inside 東京について was never looked up as a name (the whole run was one word), and a
    name of two characters (東京, 李明) was too short to be a title at all."""
    for rel, text in {
        "Places/東京.md": "日本の首都。\n",
        "People/李明.md": "负责预算。\n",
        "Notes/旅行記.md": "東京に行った。東京は大きい。東京タワーを見た。東京の夜。\n",  # the names, often
        "Notes/周会.md": "李明说了预算。李明负责招聘。李明和王芳讨论了李明的计划。\n",
    }.items():
        (vault / rel).parent.mkdir(parents=True, exist_ok=True)
        (vault / rel).write_text(text, encoding="utf-8")
    async with open_runtime(Settings(vault=vault, db_path=db_path, watch=False)) as rt:
        await rt.require_sync().sync_vault()
        for question in ("東京", "李明"):  # the whole question is the title: first
            hits = (await search(rt, question, explain=True)).results
            assert (hits[0].name, hits[0].step) == (question, "exact title"), [
                (h.name, h.signals) for h in hits
            ]
        for question, name in (
            ("東京について", "東京"),
            ("李明的情况", "李明"),
        ):  # a name inside: near the top
            hits = (await search(rt, question, explain=True)).results
            top = {h.name: h.signals or {} for h in hits[:2]}
            assert top.get(name, {}).get("anchor", 0) > 0, (question, [(h.name, h.signals) for h in hits])
