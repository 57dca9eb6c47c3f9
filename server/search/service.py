"""`search`: find the notes (nodes) that answer a question, each with its best passage (DESIGN.md section 7).

One search is one unit of work on the database thread (a single hop), in three steps:

1. candidates: the best passages and notes by bm25 (the question made safe by fts_query/names), the nearest
   passages by vector when an embedder is up, and which candidates hold every name of the question. One part
   runs in parallel on the store's aside connection, so a search uses both cores: the whole-note bm25 (full
   text), or the vector scan (hybrid, where it is the slowest part). Its snapshot may be a commit apart from
   the main thread's; step 2 reads the nodes afresh, so a note gone in between is simply not returned;
2. graph: the neighbours of the strongest hits (open edges);
3. snippets: the best passage of each result.

Fusion is pure (fusion.py). The query is embedded before step 1, with a time limit; when that fails, or no
embedder is configured or reachable, search runs on full text alone and says so (`search_mode`,
`degraded_reason`). The defaults were chosen on the LoCoMo benchmark (bench/locomo.py, docs/search.md).
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from concurrent.futures import Future
from dataclasses import dataclass, replace
from datetime import UTC, date, datetime
from typing import Any

from server.embeddings.base import Embedder, EmbeddingUnavailable
from server.embeddings.ondemand import passage_vectors, query_vector
from server.embeddings.worker import QUERY_EMBEDDER, current_search_status, mark_degraded, model_key
from server.runtime import Runtime
from server.search import anchors, distill, fusion, telling, walk, when
from server.search.fts_query import query_tokens, query_word_counts, quote_token
from server.search.fusion import Candidate, Weights
from server.search.names import MAX_NAMES, all_names_match, query_names, weighted_match
from server.store import nodes_sql, search_sql, tiers_sql, vectors_sql, walk_sql
from server.store.cjk import has_cjk, spaced
from server.store.search_sql import NodeFilter, NodeRow, PassageHit

log = logging.getLogger(__name__)

MAX_LIMIT = 50
MIN_LEADERS = 50  # candidates kept for the graph and recency step (at least 5 x limit)
QUERY_EMBED_TIMEOUT = 2.0  # seconds; past this, answer from full text rather than keep the person waiting
ROW_BUDGET = (
    8_000  # about 6 ms of bm25 on 2 cores; past it the question's rarer co-occurrences decide (_bounded)
)
RESCORE_BUDGET = 0.4  # seconds (p95 of a search while the backfill runs stays under 1 s): past it, passages not yet embedded count by their words alone
DISTILL_WINDOW = 20  # results the distill step may reorder (at least twice the limit)
WALK_LINKS = 2000  # links fetched per hop of the graph walk: a hub's thousands of backlinks are not all read
MAX_EVENTS = 3  # events of an order or duration question searched on their own
MAX_EMBED_CHARS = 2000  # a question's meaning is in its first lines; long inputs would only slow the embedder


@dataclass(frozen=True)
class SearchHit:
    """One node found: `snippet` is its best passage; `signals` (when explain was asked) says why it ranked."""

    id: str
    label: str
    name: str
    path: str | None
    score: float
    snippet: str
    updated_at: str | None
    confidence: float | None
    signals: dict[str, float] | None = None
    step: str | None = None  # explain: which step placed it (exact title, text, semantic, anchor, graph, ...)
    status: str = "active"  # "archived" for a forgotten entity (include_archived), "stub" for a name only


@dataclass(frozen=True)
class SearchResponse:
    results: list[SearchHit]
    search_mode: str  # "hybrid" | "fulltext"
    degraded_reason: str | None = None


@dataclass(frozen=True)
class Tuning:
    """The knobs of ranking; the benchmark varies them, the product uses `DEFAULT_TUNING`."""

    fulltext: Weights = fusion.FULLTEXT
    hybrid: Weights = fusion.HYBRID
    use_notes: bool = True  # the whole-note row beside the passages
    name_weight: int = 2  # how many times a capitalised name counts in bm25
    prefix_min: int | None = 5  # words this long also match as a prefix of their stem (None: exact only)
    passage_candidates: int = 300
    note_candidates: int = 100
    vector_candidates: int = 100
    row_budget: int | None = ROW_BUDGET  # rows bm25 may score per index before only rows with every word are
    rescore: int = 30  # the best full-text passages the model re-scores (see _rescore)
    rescore_budget: float | None = RESCORE_BUDGET  # seconds of embedding a query may spend on them
    distill: bool = True  # the top results chosen for coverage (distill.py)
    time_routing: bool = True  # time words favour notes dated then; order questions fetch every event


DEFAULT_TUNING = Tuning()


async def search(
    rt: Runtime,
    query: str,
    *,
    limit: int = 10,
    label: str | None = None,
    include_archived: bool = False,
    as_of: str | None = None,
    explain: bool = False,
    reference_time: str | None = None,
) -> SearchResponse:
    """The nodes best matching `query`, best first. Never raises on the query's content; a bad `as_of`
    raises ValueError naming the expected format. `limit` is clamped to 1..50."""
    where = NodeFilter(label=label, include_archived=include_archived, as_of=normalize_as_of(as_of))
    reference = parse_reference_time(reference_time)
    clamped = max(1, min(MAX_LIMIT, int(limit)))
    return await run_search(rt, query, where, clamped, explain, DEFAULT_TUNING, reference=reference)


def parse_reference_time(text: str | None) -> datetime:
    """When the question is asked ("last Saturday" counts back from it): an ISO date or date-time; now when
    not given. A date-time without a zone is taken as the person's local time, as they would write it."""
    if text is None or not text.strip():
        return datetime.now().astimezone()
    value = text.strip()
    try:
        moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
        # A zone-less moment is placed in the person's zone; the first hours of year 1 have no local time
        # there (review 22d: "year 0 is out of range" came through as the tool's error).
        return moment if moment.tzinfo is not None else moment.astimezone()
    except (ValueError, OverflowError):
        raise ValueError(
            f"reference_time must be an ISO date such as 2025-03-01 or a date-time such as "
            f"2025-03-01T18:30:00 (from year 2 to 9998), not {text!r}"
        ) from None


def normalize_as_of(as_of: str | None) -> str | None:
    """An ISO date stays a date (the whole day counts); a date-time becomes the store's UTC timestamp form."""
    if as_of is None or not as_of.strip():
        return None
    text = as_of.strip()
    try:
        if len(text) == 10:
            return date.fromisoformat(text).isoformat()
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise ValueError(
            f"as_of must be an ISO date such as 2025-03-01 (or a date-time such as 2025-03-01T12:00:00Z), "
            f"not {as_of!r}"
        ) from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


async def run_search(
    rt: Runtime,
    query: str,
    where: NodeFilter,
    limit: int,
    explain: bool,
    tuning: Tuning,
    *,
    reference: datetime | None = None,
) -> SearchResponse:
    """`search` with explicit tuning (the benchmark's entry point; the tool goes through `search`)."""
    started = time.monotonic()
    intent = when.resolve(query, reference or datetime.now().astimezone()) if tuning.time_routing else None
    tokens, repeats = await _query_words(rt, query)
    # A capitalised word of a date phrase ("in March", "last Thursday", "on Valentine's day") says when,
    # which the time step reads from the notes' dates; as a name it would also demand the word itself.
    dated = set(query_tokens(" ".join(w.phrase for w in intent.windows))) if intent is not None else set()
    names = [name for name in query_names(query) if name in tokens and name not in dated]
    names = await _with_cjk_names(rt, query, names, tokens, where)
    match = weighted_match(
        query,
        names,
        name_weight=tuning.name_weight,
        prefix_min=tuning.prefix_min,
        tokens=tokens,
        repeats=repeats,
    )
    if match is None:
        mode, reason = _mode_without_query(rt)
        return SearchResponse([], mode, reason)
    vector, reason = await _query_vector(rt, query)
    plan = _Plan(
        query, match, all_names_match(names), tokens, vector, where, limit, tuning, intent, frozenset(dated)
    )
    aside = rt.store.read_aside(_aside_hits, match, vector, where, tuning)
    gathered = await rt.store.read(_gather, plan, aside)
    semantic: list[tuple[int, str, float]] = []
    if vector is not None:
        semantic = await _rescore(rt, vector, gathered, tuning)
    ranked = await rt.store.read(_finish, plan, gathered, semantic)
    hits = [_hit(c, row, snippet, explain) for c, row, snippet in ranked]
    if intent is not None and len(intent.events) > 1 and intent.kind in ("order", "duration"):
        hits = await _with_every_event(
            rt, hits, intent.events, where, limit, explain, tuning, reference, started
        )
    return SearchResponse(hits, "hybrid" if vector is not None else "fulltext", reason)


async def _with_every_event(
    rt: Runtime,
    hits: list[SearchHit],
    events: tuple[str, ...],
    where: NodeFilter,
    limit: int,
    explain: bool,
    tuning: Tuning,
    reference: datetime | None,
    started: float,
) -> list[SearchHit]:
    """An order or duration question ("which came first, X or Y?", "how many days between X and Y?") is
    answered from every event's note: each event is searched on its own, and its best note, when the
    question's own ranking left it out of the first places, is put right after the first result (step
    "time: event"). The question's own ranking keeps the rest of its order. The event searches share what
    is left of the question's time budget for the model (`started`: when the question's search began), so
    the question as a whole keeps to it, not each of its three or four searches."""
    firsts: list[SearchHit] = []
    for event in events[:MAX_EVENTS]:
        single = replace(tuning, time_routing=False, rescore_budget=_left(tuning.rescore_budget, started))
        found = (await run_search(rt, event, where, 1, explain, single, reference=reference)).results
        if found and found[0].id not in {h.id for h in firsts}:
            firsts.append(found[0])
    head = min(len(events[:MAX_EVENTS]) + 1, limit)
    shown = {h.id for h in hits[:head]}
    missing = [replace(h, step="time: event" if explain else None) for h in firsts if h.id not in shown]
    if not missing:
        return hits
    kept = [h for h in hits if h.id not in {m.id for m in missing}]
    return (kept[:1] + missing + kept[1:])[:limit]


def _left(budget: float | None, started: float) -> float | None:
    """What is left of a time `budget` (None: no limit) begun at `started` (time.monotonic)."""
    return None if budget is None else max(0.0, budget - (time.monotonic() - started))


async def _rescore(
    rt: Runtime, vector: QueryVector, gathered: _Gathered, tuning: Tuning
) -> list[tuple[int, str, float]]:
    """Step 1b: the model's view of the best full-text passages. The top `tuning.rescore` passages by bm25
    that the vector scan did not bring are compared with the query by the embedder; vectors not stored yet
    are computed now, within `tuning.rescore_budget` seconds, and kept (embedding.ondemand). So the model
    helps from the first query, before the background backfill has reached those passages."""
    seen = {chunk_id for chunk_id, _, _ in gathered.vectors}
    wanted = [h for h in gathered.passages[: tuning.rescore] if h.chunk_id not in seen]
    if not wanted:
        return []
    try:
        found = await passage_vectors(rt, [h.chunk_id for h in wanted], budget=tuning.rescore_budget)
    except EmbeddingUnavailable as exc:
        log.info("passages not re-scored by the model: %s", exc)
        return []
    kept = [h for h in wanted if h.chunk_id in found]
    scores = _cosines(vector.values, [found[h.chunk_id] for h in kept])
    return [(h.chunk_id, h.node_id, score) for h, score in zip(kept, scores, strict=True)]


def _cosines(query: list[float], vectors: list[Any]) -> list[float]:
    """Cosine similarities of unit vectors: one matrix product when they are numpy arrays."""
    if vectors and hasattr(vectors[0], "dtype"):
        import numpy as np  # present whenever the embedder returns arrays (the local extra)

        return (np.stack(vectors) @ np.asarray(query, dtype=vectors[0].dtype)).astype(float).tolist()
    return [math.fsum(x * y for x, y in zip(query, v, strict=False)) for v in vectors]


async def _with_cjk_names(
    rt: Runtime, query: str, names: list[str], tokens: list[str], where: NodeFilter
) -> list[str]:
    """`names` and the names a Chinese, Japanese or Korean question holds: a stretch of a run of such characters
    that is a note's name or alias (東京 in 東京について). These scripts have no capitals to mark a name, so the
    notes themselves say which stretches are names (review 22g); each counts as a capitalised word does, by
    the character pairs it is searched by."""
    if not has_cjk(query):
        return names
    found = await rt.store.read(walk_sql.named_nodes, anchors.cjk_stretches(query), where)
    pairs = dict.fromkeys(p for phrase, _ in found for p in spaced(phrase).split() if p in tokens)
    more = [p for p in pairs if p not in names]
    return names + more if len(names) + len(more) <= MAX_NAMES else names


async def _query_words(rt: Runtime, query: str) -> tuple[list[str], dict[str, int] | None]:
    """The words to search by, and how many times each counts (None: once): every word of a short query;
    a long query's most telling words, weighted by how often it uses them (telling.py)."""
    counts = query_word_counts(query)
    if not telling.is_long(counts):
        return list(counts), None  # what query_tokens gives: a short query is searched as it always was
    words = await rt.store.read(_telling_words, counts)
    return words, telling.repeats(counts, words)


def _telling_words(conn: Any, counts: dict[str, int]) -> list[str]:
    words = telling.lookup_words(counts)
    terms = [quote_token(word) for word in words]
    frequencies, notes = search_sql.note_frequencies(conn, terms, telling.COMMON_AT)
    return telling.telling_words(counts, dict(zip(words, frequencies, strict=True)), notes)


@dataclass(frozen=True)
class _Plan:
    """Everything the database-thread part of one search needs."""

    query: str
    match: str
    names_match: str | None
    tokens: list[str]
    vector: QueryVector | None
    where: NodeFilter
    limit: int
    tuning: Tuning
    time: when.TimeIntent | None = None
    when_words: frozenset[str] = frozenset()  # the words of the question's date phrases


def _rank(
    conn: Any, plan: _Plan, aside: Future[AsideHits] | None = None
) -> list[tuple[Candidate, NodeRow, str]]:
    """The whole ranking as one unit on the database thread, without the model's re-scoring (`aside` is
    `_aside_hits` running in parallel, or None to do that part here too): (candidate, node, snippet)."""
    return _finish(conn, plan, _gather(conn, plan, aside), [])


@dataclass(frozen=True)
class _Gathered:
    """Step 1's hits before fusion: whole notes and passages by bm25, passages by vector scan, and the
    weights of this search's mode."""

    notes: dict[str, float]
    passages: list[PassageHit]
    vectors: list[tuple[int, str, float]]
    weights: Weights


def _finish(
    conn: Any, plan: _Plan, gathered: _Gathered, semantic: list[tuple[int, str, float]]
) -> list[tuple[Candidate, NodeRow, str]]:
    """Steps 2-4 on the database thread: fuse (with the model's re-scored passages), anchor, expand,
    distill; (candidate, node, snippet) best first."""
    weights = gathered.weights
    vectors = _merged(gathered.vectors, semantic)
    ids = sorted({h.node_id for h in gathered.passages} | gathered.notes.keys() | {n for _, n, _ in vectors})
    named = search_sql.notes_matching(conn, plan.names_match, ids) if plan.names_match else None
    found = fusion.fuse_text(gathered.notes, gathered.passages, vectors, named, weights)
    anchored = _anchor(conn, plan, found, weights)
    # Graph and recency add little unless the question names a note: only the leaders can still reach the top.
    # A note left out here and brought back (by its title, its date or the walk) keeps what its words scored
    # (review 22d: it came back blank, so how many results were asked for changed which were shown).
    fused = found
    leaders = sorted(fused.values(), key=lambda c: -(c.text_score + c.signals.get("anchor", 0.0)))
    found = {c.node_id: c for c in leaders[: max(MIN_LEADERS, 5 * plan.limit)]}
    for node_id in anchored.named:
        found.setdefault(node_id, anchored.candidates[node_id])
    for node_id in anchored.exact:  # a title longer than the runs looked up, or that no word of it finds
        found.setdefault(node_id, fused.get(node_id) or Candidate(node_id))
    if plan.time is not None and plan.time.windows and weights.time > 0:
        # The notes dated in the question's window are candidates whatever their words ("what did I do last
        # Saturday?" and that day's daily note); a window holding more notes than the leaders adds none.
        spans = [(w.start, w.end) for w in plan.time.windows]
        for node_id in nodes_sql.dated_in(conn, spans, plan.where.sql(), MIN_LEADERS):
            found.setdefault(node_id, fused.get(node_id) or Candidate(node_id))
    nodes = _expand(conn, found, fused, anchored, plan.where, weights, plan.limit)
    if plan.time is not None and plan.time.windows and weights.time > 0:
        dated = nodes_sql.note_dates(conn, [c.node_id for c in found.values() if c.node_id in nodes])
        for node_id, day in dated.items():
            if node_id in found and (fit := plan.time.fit(day)) > 0:
                found[node_id].signals["time"] = weights.time * fit
    if weights.recency > 0:
        now = datetime.now(UTC)
        for c in found.values():
            if (row := nodes.get(c.node_id)) is not None:
                c.signals["recency"] = weights.recency * fusion.recency(
                    row.confidence, row.updated_at, now, weights.half_life_days
                )
    ordered = [c for c in fusion.ranked(found) if c.node_id in nodes]
    ordered = [c for c in ordered if c.node_id in anchored.exact] + [
        c for c in ordered if c.node_id not in anchored.exact
    ]
    window = ordered[: max(DISTILL_WINDOW, 2 * plan.limit)]
    texts = _snippets(conn, plan.tokens, window)
    by_score = {c.node_id: i for i, c in enumerate(window)}
    if plan.tuning.distill and len(window) > 2:
        head = [c for c in window if c.node_id in anchored.exact]
        rest = distill.diversify(
            [c for c in window if c.node_id not in anchored.exact],
            lambda c: c.score,
            lambda c: c.node_id,
            texts,
        )
        window = head + rest
    top = window[: plan.limit]
    for i, c in enumerate(top):
        if c.node_id in anchored.exact:
            c.step = "exact title"
        elif by_score[c.node_id] > i:  # a copy of a result above gave way: the step that found it, and that
            c.step = f"{fusion.main_step(c)}; distill moved it up from {by_score[c.node_id] + 1} to {i + 1}"
        else:
            c.step = fusion.main_step(c)
    return [(c, nodes[c.node_id], texts.get(c.node_id, "")) for c in top]


def _merged(
    scanned: list[tuple[int, str, float]], rescored: list[tuple[int, str, float]]
) -> list[tuple[int, str, float]]:
    """The vector scan's passages and the re-scored ones, each passage once."""
    seen = {chunk_id for chunk_id, _, _ in scanned}
    return scanned + [hit for hit in rescored if hit[0] not in seen]


@dataclass
class _Anchored:
    """What the anchor step found: notes whose full name the question holds (with their candidates), and the
    ones whose title the whole question is."""

    named: dict[str, float]  # node id -> strength (anchors.strength)
    exact: set[str]
    candidates: dict[str, Candidate]


def _anchor(conn: Any, plan: _Plan, found: dict[str, Candidate], weights: Weights) -> _Anchored:
    """Step 2: the notes the question names (anchors.py) get the anchor signal; the whole question as a title
    marks its notes exact."""
    wanted = anchors.phrases(plan.query, plan.when_words)
    lookups = list(wanted.runs)
    lookups += [phrase for phrase in (wanted.whole, wanted.bare) if phrase is not None]
    named: dict[str, float] = {}
    exact: set[str] = set()
    bare: set[str] = set()  # a title only when the question less its edges is one and the question is none
    for phrase, node_id in walk_sql.named_nodes(conn, lookups, plan.where):
        if phrase == wanted.whole:
            exact.add(node_id)
        if phrase == wanted.bare:
            bare.add(node_id)
        if phrase in wanted.runs:
            named[node_id] = max(named.get(node_id, 0.0), anchors.strength(phrase, wanted.runs[phrase]))
    exact = exact or bare
    candidates: dict[str, Candidate] = {}
    for node_id, strength in named.items():
        c = found.get(node_id) or Candidate(node_id)
        c.signals["anchor"] = weights.anchor * strength
        candidates[node_id] = c
    return _Anchored(named, exact, candidates)


def _expand(
    conn: Any,
    found: dict[str, Candidate],
    fused: dict[str, Candidate],
    anchored: _Anchored,
    where: NodeFilter,
    weights: Weights,
    limit: int,
) -> dict[str, NodeRow]:
    """Step 3: a walk of the links around the named notes and the strongest hits (walk.py); the notes it
    reaches get the graph signal, and the best reached ones join the candidates (with what their words scored,
    from `fused`, when they had been left out). Returns the allowed nodes among all candidates."""
    hits = fusion.graph_seeds(found, weights)
    seeds: dict[str, float] = {}
    if anchored.named:
        total = sum(anchored.named.values())
        for node_id, strength in anchored.named.items():
            seeds[node_id] = 0.5 * strength / total
    if hits:
        total = sum(max(found[h].text_score, 1e-9) for h in hits)
        share = 0.5 if anchored.named else 1.0
        for node_id in hits:
            seeds[node_id] = seeds.get(node_id, 0.0) + share * max(found[node_id].text_score, 1e-9) / total
    links: list[tuple[str, str]] = []
    if seeds:
        links = walk_sql.open_links(conn, sorted(seeds), WALK_LINKS)
        if anchored.named:
            around = {
                n for link in links for n in link if link[0] in anchored.named or link[1] in anchored.named
            }
            links += walk_sql.open_links(conn, sorted(around - seeds.keys()), WALK_LINKS)
    inflow = walk.personalized_pagerank(links, seeds) if links else {}
    reached = {node_id: value for node_id, value in inflow.items() if value > 0}
    weight = weights.graph_anchored if anchored.named else weights.graph
    joining = sorted(reached, key=lambda n: (-reached[n], n))[: max(MIN_LEADERS, 5 * limit)]
    nodes = search_sql.node_rows(conn, sorted(found.keys() | set(joining)), where)
    allowed = {n: v for n, v in reached.items() if n in nodes}
    if allowed and weight > 0:
        best = max(allowed.values())
        for node_id in joining:
            if node_id in nodes:
                found.setdefault(node_id, fused.get(node_id) or Candidate(node_id))
        for node_id, value in allowed.items():
            if node_id in found:
                found[node_id].signals["graph"] = weight * value / best
    return nodes


def _mode_without_query(rt: Runtime) -> tuple[str, str | None]:
    status = current_search_status(rt)
    return str(status.get("mode", "fulltext")), status.get("reason")  # type: ignore[return-value]


@dataclass(frozen=True)
class QueryVector:
    model: str  # the embedder's model key, as recorded beside the stored vectors
    values: list[float]


async def _query_vector(rt: Runtime, query: str) -> tuple[QueryVector | None, str | None]:
    """The query's vector, or (None, why not) — None without a reason when no embedder is configured."""
    if rt.settings.embedding_provider == "none":
        return None, None
    status = current_search_status(rt)
    if status.get("degraded"):
        return None, str(status.get("reason") or "vector search is unavailable")
    embedder = rt.state.get(QUERY_EMBEDDER)
    if not isinstance(embedder, Embedder):
        return None, "the embedding worker is not running, so queries are not embedded"
    try:
        task = query_vector(rt, embedder, query[:MAX_EMBED_CHARS])  # cached, ahead of the backfill
        values = await asyncio.wait_for(task, QUERY_EMBED_TIMEOUT)
    except TimeoutError:
        reason = f"the embedder did not answer within {QUERY_EMBED_TIMEOUT:g}s"
    except EmbeddingUnavailable as exc:
        reason = str(exc)
    else:
        return QueryVector(model_key(embedder), values), None
    mark_degraded(rt, reason)  # the worker probes the embedder and restores hybrid search when it answers
    return None, reason


@dataclass(frozen=True)
class AsideHits:
    """The part of step 1 done on the aside connection: whole-note hits (None when left to the main thread)
    and vector hits."""

    notes: dict[str, float] | None
    vectors: list[tuple[int, str, float]]


def _aside_hits(
    conn: Any, match: str, vector: QueryVector | None, where: NodeFilter, tuning: Tuning
) -> AsideHits:
    """With a query vector: the vector scan (the slowest part of a hybrid search); else the whole-note bm25."""
    if vector is not None:
        return AsideHits(None, _nearest(conn, vector, where, tuning))
    return AsideHits(_note_hits(conn, match, where, tuning), [])


def _nearest(
    conn: Any, vector: QueryVector, where: NodeFilter, tuning: Tuning
) -> list[tuple[int, str, float]]:
    """The nearest stored passages; none while the stored vectors are not the query's model's (none stored
    yet, or another model's being rebuilt): the re-scoring of the best full-text passages still applies."""
    if vectors_sql.vector_space(conn) != (vector.model, len(vector.values)):
        return []
    clause, params = where.sql()
    return vectors_sql.nearest_chunks(conn, vector.values, tuning.vector_candidates, clause, params)


def _note_hits(conn: Any, match: str, where: NodeFilter, tuning: Tuning) -> dict[str, float]:
    if not tuning.use_notes:
        return {}
    scored = _bounded(conn, "notes", match, tuning)
    return dict(search_sql.note_hits(conn, scored.match, tuning.note_candidates, where, scored.newest))


@dataclass(frozen=True)
class Scored:
    """What bm25 scores in one index: the rows `match` finds, or only the `newest` of them (the last written)."""

    match: str
    newest: int | None = None


def _bounded(conn: Any, index: str, match: str, tuning: Tuning) -> Scored:
    """What bm25 scores in `index` ("passages" or "notes") for the question `match`, so that a search's cost
    does not grow with how common its words are (issue 15): at most `tuning.row_budget` rows, whatever the vault.

    bm25 scores every row the OR of the question's words finds; in a vault where those words are in most notes
    that is tens of thousands of rows. Within the budget, nothing changes. Past it, the question narrows the
    way text retrieval always has (Manning, Raghavan & Schuetze, *Introduction to Information Retrieval*,
    7.1.2), first the rule that loses least:

    1. coordination: the rows holding *every* word, when there are enough of them to fill the candidates'
       first places (MIN_LEADERS). They rank first anyway; their scores are exactly what the OR gives them;
    2. index elimination: when the words seldom meet, the most common ones are left out of the question (they
       have the lowest idf, so they add least to any row's score; bm25 counts a word in half the rows as
       nothing at all) until the rows of the words kept fit the budget. A row holding every word holds the
       words kept, so nothing step 1 would have found is lost;
    3. when even that is too many (a word in more rows than the budget, with nothing rarer beside it), the
       words do not tell the rows apart: bm25 scores the `row_budget` rows written last, the recent notes a
       person most likely means.

    Counting reads only the index's lists of row ids, each count stopping at the budget."""
    budget = tuning.row_budget
    if budget is None:
        return Scored(match)
    if tiers_sql.match_count(conn, index, match, budget + 1) <= budget:
        return Scored(match)
    terms = match.split(" OR ")
    words = list(dict.fromkeys(terms))  # each word once, in the question's order (names repeat in `match`)
    if len(words) < 2:
        return Scored(match, budget)
    every = " AND ".join(words)
    together = tiers_sql.match_count(conn, index, every, budget + 1)
    if together >= MIN_LEADERS:
        return Scored(every, budget if together > budget else None)
    rows = {word: tiers_sql.match_count(conn, index, word, budget + 1) for word in words}
    kept = sorted(words, key=lambda w: (rows[w], words.index(w)))
    while len(kept) > 1 and sum(rows[w] for w in kept) > budget:
        kept.pop()  # the most common word left
    if sum(rows[w] for w in kept) > budget:
        return Scored(match, budget)
    return Scored(" OR ".join(t for t in terms if t in kept))


def _gather(conn: Any, plan: _Plan, aside: Future[AsideHits] | None = None) -> _Gathered:
    """Step 1 (on the DB thread): the text and vector hits. The aside part (`_aside_hits`) is taken from
    `aside` when given. A query the embedder answered makes this a hybrid search even when no passage vector
    is stored yet (the model re-scores the best passages: `_rescore`)."""
    tuning, where, vector = plan.tuning, plan.where, plan.vector
    scored = _bounded(conn, "passages", plan.match, tuning)
    passages = search_sql.passage_hits(conn, scored.match, tuning.passage_candidates, where, scored.newest)
    # With a vector, the aside part is the vector scan and the notes are scored here, before waiting for it.
    notes = _note_hits(conn, plan.match, where, tuning) if vector is not None else None
    extra = (_aside_result(aside) if aside is not None else None) or _aside_hits(
        conn, plan.match, vector, where, tuning
    )
    if notes is None:
        notes = extra.notes or {}
    weights = tuning.hybrid if vector is not None else tuning.fulltext
    if not tuning.use_notes:
        weights = replace(weights, note=0.0)
    if weights.note <= 0:
        notes = {}
    return _Gathered(notes, passages, extra.vectors, weights)


def _aside_result(aside: Future[AsideHits]) -> AsideHits | None:
    """The aside part's result, or None (then the caller does it itself) when the aside connection failed."""
    try:
        return aside.result()
    except Exception as exc:  # e.g. the second connection could not open: this search does it all here
        log.warning("search's parallel read failed (%s); doing it on the main connection", exc)
        return None


def _snippets(conn: Any, tokens: list[str], top: list[Candidate]) -> dict[str, str]:
    """Step 3: the text of each result's best passage (picked by word overlap for nodes that came without)."""
    chunk_of = {c.node_id: c.chunk_id for c in top if c.chunk_id is not None}
    missing = [c.node_id for c in top if c.chunk_id is None]
    texts = search_sql.passage_texts(conn, list(chunk_of.values()))
    snippets = {node_id: texts.get(chunk_id, "") for node_id, chunk_id in chunk_of.items()}
    snippets.update(fusion.best_by_overlap(tokens, search_sql.passages_of(conn, missing)))
    return snippets


def _hit(c: Candidate, row: NodeRow, snippet: str, explain: bool) -> SearchHit:
    return SearchHit(
        id=row.id,
        label=row.label,
        name=row.name,
        path=row.path,
        score=round(c.score, 4),
        snippet=snippet,
        updated_at=row.updated_at,
        confidence=row.confidence,
        signals={k: round(v, 4) for k, v in sorted(c.signals.items())} if explain else None,
        step=c.step if explain else None,
        status=row.status,
    )
