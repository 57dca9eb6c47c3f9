"""Generate a vault for benchmarks: typed notes in folders, frontmatter, relations and wikilinks.

    python bench/vaultgen.py /tmp/vault --notes 10000                     # realistic (the default)
    python bench/vaultgen.py /tmp/vault --notes 10000 --mode small-vocab

Deterministic for a seed. Two corpora:

- `realistic`: a 6,000-word vocabulary; bodies of 200-2,000 words of prose-like text under a few headings,
  names of one to three words, ~5 wikilinks per note (some with aliases or headings), so parsing and
  chunking see what a real vault holds.
- `small-vocab`: every word of every note (titles, headings, bodies) drawn from 200 words, titles of exactly
  three of them, bodies of 100-1,000 words, five wikilinks each. Every query word then matches thousands of
  passages: the worst case for bm25 over passages, and a fair stand-in for a vault full of one person's
  recurring vocabulary (issue 15). Titles share words with many other titles.
"""

from __future__ import annotations

import argparse
import random
from dataclasses import dataclass
from pathlib import Path

FOLDERS = (
    ("Projects", "Project", 0.10),
    ("Concepts", "Concept", 0.20),
    ("Technologies", "Technology", 0.08),
    ("Problems", "Problem", 0.12),
    ("Decisions", "Decision", 0.08),
    ("People", "Person", 0.07),
    ("Daily", None, 0.20),
    ("Notes", None, 0.15),
)
RELATIONS = {
    "Project": ("USES", "Technology"),
    "Problem": ("APPLIES", "Concept"),
    "Decision": ("CHOOSES", "Technology"),
    "Person": ("WORKS_ON", "Project"),
}
SYLLABLES = "ka lo mi ne ru sa te vo zi pa an el or us ti ba de fo gu hi ja".split()
MODES = ("realistic", "small-vocab")


@dataclass(frozen=True)
class Corpus:
    """What a mode changes: the vocabulary's size, how many words a name has, how long a body is."""

    vocabulary: int
    name_words: tuple[int, int]
    body_words: tuple[int, int]


CORPORA = {
    "realistic": Corpus(vocabulary=6000, name_words=(1, 3), body_words=(200, 2000)),
    "small-vocab": Corpus(vocabulary=200, name_words=(3, 3), body_words=(100, 1000)),
}


def _vocabulary(rng: random.Random, size: int = 6000) -> list[str]:
    words = set()
    while len(words) < size:
        words.add("".join(rng.choice(SYLLABLES) for _ in range(rng.randint(1, 4))))
    return sorted(words)


def _names(rng: random.Random, vocab: list[str], count: int, words: tuple[int, int]) -> list[str]:
    names: set[str] = set()
    while len(names) < count:
        names.add(" ".join(rng.choice(vocab).capitalize() for _ in range(rng.randint(*words))))
    return sorted(names)


def _paragraph(rng: random.Random, vocab: list[str], words: int) -> str:
    sentences, left = [], words
    while left > 0:
        n = min(left, rng.randint(6, 18))
        sentences.append(" ".join(rng.choice(vocab) for _ in range(n)).capitalize() + ".")
        left -= n
    return " ".join(sentences)


def _body(rng: random.Random, vocab: list[str], name: str, links: list[str], length: tuple[int, int]) -> str:
    total = rng.randint(*length)
    sections = max(1, total // 300)
    parts = [f"# {name}\n"]
    per = total // sections
    for s in range(sections):
        if s:
            parts.append(f"## {rng.choice(vocab).capitalize()} {rng.choice(vocab)}\n")
        text = _paragraph(rng, vocab, per)
        parts.append(text + "\n")
    # Spread the wikilinks through the body in every common form.
    lines = "\n".join(parts).split("\n")
    for i, target in enumerate(links):
        form = ("[[{t}]]", "[[{t}|see {t}]]", "[[{t}#Details]]", "![[{t}]]", "[[{t}]]")[i % 5]
        at = rng.randrange(len(lines))
        lines[at] = lines[at] + " See " + form.format(t=target) + "."
    return "\n".join(lines).rstrip("\n") + "\n"


def generate_vault(root: Path, notes: int, seed: int = 0, mode: str = "realistic") -> list[Path]:
    """Write `notes` notes of the corpus `mode` (see MODES) under `root`; returns their paths."""
    corpus = CORPORA[mode]
    rng = random.Random(seed)
    vocab = _vocabulary(rng, corpus.vocabulary)
    plan: list[tuple[str, str | None, str]] = []
    counts = [max(1, int(notes * share)) for _, _, share in FOLDERS]
    counts[-1] += notes - sum(counts)
    all_names = _names(rng, vocab, notes, corpus.name_words)
    rng.shuffle(all_names)
    by_label: dict[str, list[str]] = {}
    i = 0
    for (folder, label, _), count in zip(FOLDERS, counts, strict=True):
        for _ in range(count):
            # Daily notes are named by date (with a counter: many notes share a day) in the realistic corpus;
            # the small-vocabulary corpus keeps every title to three of its words.
            dated = folder == "Daily" and mode == "realistic"
            name = f"2026-{1 + i % 12:02d}-{1 + i % 28:02d} {i}" if dated else all_names[i]
            plan.append((folder, label, name))
            if label:
                by_label.setdefault(label, []).append(name)
            i += 1
    every = [name for _, _, name in plan]
    written = []
    for folder, label, name in plan:
        front = []
        if label:
            front.append(f"type: {label}")
        front.append(f"tags: [{rng.choice(vocab)}, {rng.choice(vocab)}]")
        front.append(f"created: 2026-{rng.randint(1, 11):02d}-{rng.randint(1, 28):02d}")
        if label in ("Project", "Problem"):
            front.append(f"status: {rng.choice(['active', 'open', 'resolved', 'paused'])}")
        if label in RELATIONS:
            rel, target_label = RELATIONS[label]
            targets = rng.sample(by_label[target_label], k=min(3, len(by_label[target_label])))
            front.append("relations:")
            front.append(f"  {rel}: [" + ", ".join(f'"[[{t}]]"' for t in targets) + "]")
        links = rng.sample(every, k=5)
        text = "---\n" + "\n".join(front) + "\n---\n" + _body(rng, vocab, name, links, corpus.body_words)
        path = root / folder / f"{name}.md"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        written.append(path)
    return written


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("root", type=Path)
    parser.add_argument("--notes", type=int, default=10_000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--mode", choices=MODES, default="realistic")
    args = parser.parse_args()
    paths = generate_vault(args.root, args.notes, args.seed, args.mode)
    print(f"wrote {len(paths)} notes under {args.root}")


if __name__ == "__main__":
    main()
