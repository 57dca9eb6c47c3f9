"""Wikilink extraction in every Obsidian form (vault_sync.wikilinks)."""

from __future__ import annotations

import pytest

from vault_sync.wikilinks import extract_wikilinks, link_target, relation_target, relation_targets


@pytest.mark.parametrize(
    ("link", "target"),
    [
        ("[[X]]", "X"),
        ("[[X|alias]]", "X"),
        ("[[X#Heading]]", "X"),
        ("[[X#^block-id]]", "X"),
        ("![[X]]", "X"),
        ("![[diagram.png]]", "diagram.png"),
        ("[[folder/X]]", "folder/X"),
        ("[[X.md]]", "X"),
        ("[[X.MD#Plan|the plan]]", "X"),
        ("[[ X  ]]", "X"),
        ("[[Projects/Engrama#Plan|the plan]]", "Projects/Engrama"),
        ("[[漢字 🙂]]", "漢字 🙂"),
    ],
)
def test_every_link_form_resolves_to_its_note(link: str, target: str) -> None:
    assert extract_wikilinks(f"see {link} here") == [target]


def test_self_links_are_ignored() -> None:
    assert extract_wikilinks("[[#Heading]] and [[#^block]] and [[|x]]") == []


def test_escaped_pipe_inside_a_table() -> None:
    assert extract_wikilinks("| a | [[X\\|alias]] |") == ["X"]


def test_order_of_first_appearance_and_case_insensitive_dedup() -> None:
    body = "[[B]] then [[a]] then [[b|again]] then ![[A]] then [[C#h]]"
    assert extract_wikilinks(body) == ["B", "a", "C"]


def test_links_in_fenced_code_blocks_are_ignored() -> None:
    body = "[[A]]\n```python\n[[B]]\n```\n[[C]]\n~~~\n[[D]]\n~~~~\n[[E]]\n"
    assert extract_wikilinks(body) == ["A", "C", "E"]


def test_a_fence_closes_only_with_the_same_character_and_length() -> None:
    body = "````\n```\n[[A]]\n~~~\n````\n[[B]]\n"
    assert extract_wikilinks(body) == ["B"]


def test_unclosed_fence_runs_to_the_end() -> None:
    assert extract_wikilinks("[[A]]\n```\n[[B]]\n") == ["A"]


def test_links_in_inline_code_are_ignored() -> None:
    body = "`[[A]]` and ``x [[B]] ` y`` and [[C]] and a lone ` tick [[D]]"
    assert extract_wikilinks(body) == ["C", "D"]


def test_crlf_body() -> None:
    assert extract_wikilinks("[[A]]\r\n```\r\n[[B]]\r\n```\r\n[[C]]\r\n") == ["A", "C"]


def test_no_link_across_lines_or_with_brackets() -> None:
    assert extract_wikilinks("[[A\nB]] [[[C]]] [[D]") == ["C"]


def test_link_target() -> None:
    assert link_target("X#h|a") == "X"
    assert link_target("#h") == ""


@pytest.mark.parametrize(
    ("value", "targets"),
    [
        ("[[X]]", ["X"]),
        ("[[X|a]]", ["X"]),
        ("X", ["X"]),
        ("  C#  ", ["C#"]),
        ("", []),
        ("[[A]], [[B#h]]", ["A", "B"]),
    ],
)
def test_relation_values(value: str, targets: list[str]) -> None:
    assert relation_targets(value) == targets
    assert relation_target(value) == (targets[0] if targets else None)
