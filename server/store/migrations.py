# pyright: reportAttributeAccessIssue=false
# (sqlean re-exports its names from a compiled module without type stubs, so pyright cannot see them.)
"""Numbered schema migrations, applied in order on open; each runs once (recorded in `schema_migrations`)."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import sqlean

from server.store import nodes_sql, passages_sql, sync_sql
from server.store.clock import utc_now

log = logging.getLogger(__name__)

# How long opening a database that needs upgrading waits for the write lock (ms): another engrama-vault process
# (a second MCP client started at the same moment) may hold it for as long as one migration takes, which on a
# large vault is longer than the usual busy timeout (review 23c: migration 10 took 10.5 s at 10,000 notes, and
# the second server exited saying another program held the database).
UPGRADE_WAIT_MS = 300_000

M001_CREATE_GRAPH = """
        create table meta (key text primary key, value text not null);

        create table nodes (
            id text primary key,                -- the note's engrama_id
            label text not null,
            name text not null,
            properties text not null default '{}',   -- JSON object
            path text,                          -- vault-relative; null for stubs and tool-only nodes
            checksum text,
            status text not null default 'active' check (status in ('active', 'archived', 'stub')),
            confidence real not null default 1.0,
            valid_from text,
            valid_to text,
            decayed_at text,
            created_at text not null,
            updated_at text not null
        );
        create unique index nodes_path on nodes(path) where path is not null;
        create index nodes_name on nodes(name collate nocase, label);
        create index nodes_status on nodes(status);

        -- Every name a wikilink may use to reach a node: its path, file stem, name and aliases (casefolded).
        create table node_keys (
            key text not null,
            node_id text not null references nodes(id) on delete cascade,
            kind text not null check (kind in ('path', 'stem', 'name', 'alias')),
            primary key (key, node_id, kind)
        ) without rowid;
        create index node_keys_node on node_keys(node_id);

        create table edges (
            id integer primary key,
            source text not null references nodes(id) on delete cascade,
            type text not null,
            target text not null references nodes(id) on delete cascade,
            origin text not null check (origin in ('frontmatter', 'wikilink', 'tool')),
            confidence real not null default 1.0,
            valid_from text not null,
            valid_to text,                      -- null while the edge holds; closed, never deleted, when it leaves
            created_at text not null
        );
        create unique index edges_open on edges(source, type, target, origin) where valid_to is null;
        create index edges_source on edges(source);
        create index edges_target on edges(target);

        create table chunks (
            id integer primary key autoincrement,  -- never reused: vectors are keyed by it
            node_id text not null references nodes(id) on delete cascade,
            ordinal integer not null,
            title text not null,                -- the note's title/date context, repeated on every passage
            heading text not null default '',
            text text not null,
            embedded_model text,                -- which model's vector is stored; null = waiting for one
            unique (node_id, ordinal)
        );
        create index chunks_unembedded on chunks(id) where embedded_model is null;

        create virtual table chunks_fts using fts5(
            title, heading, text,
            content = 'chunks', content_rowid = 'id',
            tokenize = 'porter unicode61 remove_diacritics 2'
        );
        -- No insert trigger: the store indexes new passages with one set-based INSERT ... SELECT per unit of work
        -- (`sync_sql.index_new_chunks`), measured ~2x faster than a row-by-row trigger for a first sync.
        create trigger chunks_ad after delete on chunks begin
            insert into chunks_fts(chunks_fts, rowid, title, heading, text)
                values ('delete', old.id, old.title, old.heading, old.text);
        end;
        create trigger chunks_au after update of title, heading, text on chunks begin
            insert into chunks_fts(chunks_fts, rowid, title, heading, text)
                values ('delete', old.id, old.title, old.heading, old.text);
            insert into chunks_fts(rowid, title, heading, text) values (new.id, new.title, new.heading, new.text);
        end;

        -- Per-file sync state: what the bytes on disk looked like when we last read or wrote them.
        create table files (
            path text primary key,
            size integer not null,
            mtime_ns integer not null,
            checksum text not null,
            node_id text
        );

        create table insights (
            key text primary key,               -- pattern + sorted entity ids: the stable identity
            id text not null unique,
            pattern text not null,
            title text not null,
            body text not null,
            confidence real not null,
            entities text not null,             -- JSON list of node ids
            status text not null default 'pending' check (status in ('pending', 'approved', 'dismissed')),
            created_at text not null,
            updated_at text not null,
            decided_at text,
            written_paths text not null default '[]'
        );
        create index insights_status on insights(status);
"""

# (number, name, script). Append only; never edit a migration that has shipped.
# When an insight's decision was written to the vault (its own note, or a line of the dismissed list). Null
# means the decision lives only in the database (taken by a process without the vault lease), so the process
# holding the vault writes the record at its next reflect.
M002_INSIGHT_RECORDED_AT = """
        alter table insights add column recorded_at text;
"""

M003_SEARCH_INDEX = """
        -- One full-text row per note (name + whole body) beside the passage rows: whole-note and passage bm25
        -- fused find the right note more often than either alone (docs/search.md). Contentless, so the body is
        -- not stored a second time; `note_docs` gives each node a stable integer rowid for it.
        create table note_docs (
            doc integer primary key autoincrement,
            node_id text not null unique references nodes(id) on delete cascade
        );
        create virtual table notes_fts using fts5(
            name, body,
            content = '', contentless_delete = 1,
            tokenize = 'porter unicode61 remove_diacritics 2'
        );
        create trigger note_docs_ad after delete on note_docs begin
            delete from notes_fts where rowid = old.doc;
        end;

        -- Vectors live in a vec0 table created at run time for the configured size (`vectors_sql`), which
        -- only a connection with sqlite-vec loaded may touch. So a deleted or edited passage is only *noted*
        -- here, in plain SQL that works on any connection, and the embedding worker drops its vector.
        create table vec_orphans (chunk_id integer primary key);
        create trigger chunks_ad_vec after delete on chunks when old.embedded_model is not null begin
            insert or ignore into vec_orphans (chunk_id) values (old.id);
        end;
        create trigger chunks_au_vec after update of title, heading, text on chunks
        when old.embedded_model is not null begin
            update chunks set embedded_model = null where id = new.id;
            insert or ignore into vec_orphans (chunk_id) values (old.id);
        end;

        -- Notes synced before this migration: their body is rebuilt from their passages (overlapping lines
        -- count twice until the note changes again, which bm25's saturation mostly absorbs).
        insert into note_docs (node_id) select distinct node_id from chunks order by node_id;
        insert into notes_fts (rowid, name, body)
            select d.doc, n.name,
                   (select group_concat(text, char(10)) from
                       (select text from chunks c where c.node_id = d.node_id order by c.ordinal))
            from note_docs d join nodes n on n.id = d.node_id;
"""

# Temporal memory (issue #8).
# - `base_confidence`: the confidence a node or edge had at its last update, before decay; null means the
#   `confidence` column is still that value. `engrama-vault decay` recomputes confidence from it, so running
#   decay twice never compounds.
# - `property_history`: a property value that stopped holding, with when and why; the current value stays in
#   `nodes.properties`. `value` null means the key was not set until `valid_to`.
# - A node's `valid_from` is null when its start is unknown (a note that does not set `valid_from:`); until now
#   the first sync wrote the time it first saw the note, which made every older `as_of` miss it.
M004_TEMPORAL = """
        alter table nodes add column base_confidence real;
        alter table edges add column base_confidence real;
        alter table edges add column decayed_at text;

        create table property_history (
            id integer primary key,
            node_id text not null references nodes(id) on delete cascade,
            key text not null,
            value text,                         -- JSON of the value that held; null: the key was not set
            valid_from text,                    -- when it started to hold; null: before the graph knew
            valid_to text not null,             -- when it stopped
            source text not null check (source in ('note', 'tool')),
            reason text not null default ''
        );
        create index property_history_node on property_history(node_id, key, valid_to);

        update nodes set valid_from = null where valid_from = created_at;
"""

# Writes accepted by a process without the vault's lease (a second MCP client's server), on their way into the
# vault (`outbox_sql`, `server.services.outbox`). A follower adds a row in the same transaction as its graph
# change; the lease holder applies rows in `id` order through the safe writer and deletes each once its note
# holds it. `subject` is the node (or insight) the write is about, deliberately without a foreign key: a purge
# or a re-key must never drop a write the person made. `payload` is JSON (`vault_sync.outbox`).
M005_OUTBOX = """
        create table outbox (
            id integer primary key autoincrement,
            kind text not null,
            subject text not null,
            payload text not null,
            queued_at text not null,
            attempts integer not null default 0,
            last_error text,
            last_tried_at text
        );
        create index outbox_subject on outbox(subject);
"""

# When a note began (issue 12, item 8): `as_of` answers with what was known on that day, so a node's
# `valid_from` is now the best evidence of its start (`nodes_sql.note_start`): the note's `valid_from:`, else
# its `date:` / `created:`, else `began_at`, the earliest time its file and the graph vouch for (file creation
# and modification times, the time stamped in the id, when the graph first saw it). A null start meant "as far
# back as anyone asks", which let `as_of: 1990` find notes written this week.
# Notes synced before this migration get what the database knows: the earlier of when the graph first saw
# them and their file's recorded modification time, and a date key's day when it is an ISO date. Their next
# change, or a rebuild, reads the note and its file again and refines it. Stubs keep a null start.
M006_NOTE_START = """
        alter table nodes add column began_at text;

        update nodes set began_at = min(created_at, coalesce(
            (select strftime('%Y-%m-%dT%H:%M:%SZ', f.mtime_ns / 1000000000, 'unixepoch') from files f
             where f.path = nodes.path and f.mtime_ns >= 315532800000000000),
            created_at))
        where status != 'stub';

        update nodes set valid_from = min(began_at, coalesce(
            (select min(substr(j.value, 1, 10)) from json_each(nodes.properties) j
             where j.type = 'text'
               and lower(replace(replace(replace(j.key, ' ', ''), '_', ''), '-', ''))
                   in ('date', 'created', 'createdat', 'createdon', 'datecreated', 'creationdate')
               and date(substr(j.value, 1, 10)) = substr(j.value, 1, 10)),
            began_at))
        where valid_from is null and status != 'stub';
"""

# Links as each note states them, beside the edges they resolve to (issue 12: a rebuild gives the same graph).
# A link is resolved when its note is read, but which note `[[Name]]` means can change later: a better match
# appears, the note it meant is renamed or deleted. With the stated links kept, the store re-resolves the links
# that used a name whenever a node gains or loses that name, so the live graph always equals a rebuild's.
# Databases from before record each note's links the next time it is read (a rebuild records all).
M007_NOTE_LINKS = """
        create table note_links (
            source text not null references nodes(id) on delete cascade,
            rel_type text not null,
            origin text not null,
            target_text text not null,          -- the link as the note states it (alias and heading removed)
            key text not null,                  -- casefolded, without .md: matched against node_keys
            stem text,                          -- for a link with a folder, its last part (the fallback match)
            target text                         -- the node it resolves to now
        );
        create index note_links_source on note_links(source);
        create index note_links_key on note_links(key);
        create index note_links_stem on note_links(stem) where stem is not null;
        create index note_links_target on note_links(target);  -- stubs absorbed, nodes re-keyed
"""

# The session brief (issue 14): where each MCP client's previous brief left off, so Claude Desktop and Cursor
# each get their own "since" (`brief_sql`). `history_id` is the last `property_history` row a brief reported
# (rowids grow with commit order, so a fact change is reported once); node changes are read by `updated_at`
# from `briefed_at`, which lies a margin before the brief's read (a write stamps its time before it commits),
# and `brief_seen` holds the node versions inside that margin that the brief already covered.
# `clarifications` keeps the questions engrama_remember asked (a value that may replace or join the old one)
# until a later remember of that key settles them, so a brief can remind the person.
M008_BRIEF = """
        create table brief_marks (
            client text primary key,
            briefed_at text not null,
            history_id integer not null
        );
        create table brief_seen (
            client text not null,
            node_id text not null,
            fingerprint text not null,          -- status, checksum, properties: what a change changes
            primary key (client, node_id)
        ) without rowid;
        create index nodes_updated on nodes(updated_at);

        create table clarifications (
            node_id text not null references nodes(id) on delete cascade,
            key text not null,
            current text not null,              -- JSON of the value the entity had
            proposed text not null,             -- JSON of the value engrama_remember was given
            question text not null,
            asked_at text not null,
            primary key (node_id, key)
        );
"""

# Each passage's text stored once (issue 15: the database was 3.7x the vault). Passages overlap, and their texts
# were kept in `chunks` and again, through external content, read back by `chunks_fts`. Now a note's passage
# texts are one compressed pack in `note_passages` (`passages_sql`), `chunks` keeps the small per-passage row
# the vectors and the index are keyed by, and `chunks_fts` is contentless, rebuilt here from the same texts
# (bm25 reads only the index, so rankings do not change). `engrama_pack` is registered by `apply_migrations`.
# Deleting a passage no longer fires a trigger: the store takes it out of the index with its text first.
M009_PASSAGES_ONCE = """
        create table note_passages (
            id integer primary key,
            node_id text not null references nodes(id) on delete cascade,
            part integer not null,
            packed blob not null                -- part `part` of zlib(JSON {ordinal: text}), 1,024 bytes each
        );
        create unique index note_passages_node on note_passages(node_id, part);
        insert into note_passages (node_id, part, packed)
            with recursive
                packs(node_id, blob) as (
                    select node_id, engrama_pack(json_group_object(cast(ordinal as text), text))
                    from chunks group by node_id),
                parts(node_id, part, blob) as (
                    select node_id, 0, blob from packs
                    union all
                    select node_id, part + 1, blob from parts where (part + 1) * 1024 < length(blob))
            select node_id, part, substr(blob, part * 1024 + 1, 1024) from parts order by node_id, part;

        drop trigger chunks_ad;
        drop trigger chunks_au;
        drop table chunks_fts;
        -- Contentless without contentless_delete: a passage leaves the index through the 'delete' command with
        -- its text (`passages_sql.unindex_passages`), which keeps bm25's row count and lengths exact.
        create virtual table chunks_fts using fts5(
            title, heading, text,
            content = '',
            tokenize = 'porter unicode61 remove_diacritics 2'
        );
        insert into chunks_fts (rowid, title, heading, text) select id, title, heading, text from chunks order by id;

        -- `chunks` without `text`, copied rather than altered: DROP COLUMN rewrites each row in place and left
        -- its pages nine-tenths empty (measured with dbstat). Ids, and the highest id ever given, are kept:
        -- vectors are keyed by them and an id is never reused.
        create temp table m009_sequence as select seq from sqlite_sequence where name = 'chunks';
        create table chunks_packed (
            id integer primary key autoincrement,
            node_id text not null references nodes(id) on delete cascade,
            ordinal integer not null,
            title text not null,
            heading text not null default '',
            embedded_model text,
            unique (node_id, ordinal)
        );
        insert into chunks_packed (id, node_id, ordinal, title, heading, embedded_model)
            select id, node_id, ordinal, title, heading, embedded_model from chunks order by id;
        drop table chunks;
        alter table chunks_packed rename to chunks;
        update sqlite_sequence set seq = max(seq, coalesce((select seq from temp.m009_sequence), 0))
            where name = 'chunks';
        drop table temp.m009_sequence;
        create index chunks_unembedded on chunks(id) where embedded_model is null;
        create trigger chunks_ad_vec after delete on chunks when old.embedded_model is not null begin
            insert or ignore into vec_orphans (chunk_id) values (old.id);
        end;
        create trigger chunks_au_vec after update of title, heading on chunks
        when old.embedded_model is not null begin
            update chunks set embedded_model = null where id = new.id;
            insert or ignore into vec_orphans (chunk_id) values (old.id);
        end;
"""

# The whole-note index taken out of the `contentless_delete` mode (issue 13/15: rankings drifted with use). That
# mode drops a deleted row's tokens from the index but never from bm25's totals, so every edit of a note counted
# it once more in the row count and the average length, and whole-note scores drifted as the vault was used
# (`python bench/locomo.py --edits 10`: R@5 0.882 -> 0.874). Now the index is plainly contentless, and a row holds
# what the note's stored passages say (`passages_sql.note_text`), so it leaves the index through 'delete' with
# exactly its words, as passages do since migration 9. `note_docs.name` is the name the row was indexed with
# (null: no row). `chunks.repeats` is how much of a passage repeats the one before (`vault_sync.chunking`);
# `fill_note_rows` recovers it for the passages stored before and fills the rows.
M010_NOTE_ROWS_EXACT = """
        drop trigger note_docs_ad;
        drop table notes_fts;
        create virtual table notes_fts using fts5(
            name, body,
            content = '',
            tokenize = 'porter unicode61 remove_diacritics 2'
        );
        alter table note_docs add column name text;
        alter table chunks add column repeats integer not null default 0;
"""
# Names as the person sees them (issue 12: no second entity for one name). A note whose file was named on a Mac
# (or synced from one) has a decomposed name (`e` + a combining accent); the same name typed anywhere else is
# composed. Names are now stored composed and keys folded alike (`vault_sync.names`); `sync_sql.compose_names`
# brings the rows written before up to that and re-resolves the links it changes. No statement of its own.
M011_COMPOSED_NAMES = """
"""
# Each file's inode number, as read (`FileState.ino`): a rename keeps it, a copy gets another, so of two files
# carrying one note's id after the note was copied and the original renamed, the renamed one keeps the id
# (vault_sync.reconcile). Null until a file is next read.
M012_FILE_INODES = """
        alter table files add column ino integer;
"""
# The date each note is about (`nodes_sql.note_day`: its `date:`, a daily note's file name, a date in its title,
# `created:`, else when it began), stored so that a question's date window finds the notes dated in it even
# when they share no word with the question ("what did I do last Saturday?" and the daily note of that day).
M013_NOTE_DAYS = """
        alter table nodes add column note_day text;
        create index nodes_note_day on nodes(note_day) where note_day is not null;
"""
# Fact changes numbered for good (review 18a): `property_history.id` was a plain rowid, so purging a node (its
# history rows cascade away) let SQLite give the same ids to the next changes, and a brief whose mark was past
# them (`brief_marks.history_id`) never showed those changes. AUTOINCREMENT never gives an id twice; the
# sequence starts past every id a brief has already seen.
M014_HISTORY_IDS_ONCE = """
        create table property_history_once (
            id integer primary key autoincrement,
            node_id text not null references nodes(id) on delete cascade,
            key text not null,
            value text,
            valid_from text,
            valid_to text not null,
            source text not null check (source in ('note', 'tool')),
            reason text not null default ''
        );
        insert into property_history_once (id, node_id, key, value, valid_from, valid_to, source, reason)
            select id, node_id, key, value, valid_from, valid_to, source, reason from property_history order by id;
        drop table property_history;
        alter table property_history_once rename to property_history;
        create index property_history_node on property_history(node_id, key, valid_to);
        delete from sqlite_sequence where name = 'property_history';
        insert into sqlite_sequence (name, seq) values ('property_history', max(
            (select coalesce(max(id), 0) from property_history),
            (select coalesce(max(history_id), 0) from brief_marks)));
"""
# When the person last changed each note (session 19): a file's modification time moves when engrama writes the
# note's id line, so after adopting a vault every note looked just edited (the first brief's changes, the
# brief's order of active work, reflect's stale knowledge). `touched_ns` keeps the time from before that write;
# null where nothing was kept, and then the modification time stands for it (as before).
M015_TOUCHED = """
        alter table files add column touched_ns integer;
"""
# Node changes numbered in commit order (review 21d): the brief read a note's changes by its wall-clock
# `updated_at` from the previous brief's time, so after the clock jumped forward and was put right (or stepped
# back) the notes changed meanwhile were stamped before the mark and never reported. Each node's last change
# gets the next number, as `property_history`'s rows do (AUTOINCREMENT: never given twice, and a writer
# commits alone, so numbers follow commit order); a brief records the last number it saw (`change_seq`). The
# numbers of the nodes there already follow `updated_at`, and each mark starts after the changes it covered.
M016_NODE_CHANGES = """
        create table node_changes (
            seq integer primary key autoincrement,
            node_id text not null unique
        );
        insert into node_changes (node_id) select id from nodes order by updated_at, id;
        create trigger nodes_change_in after insert on nodes begin
            delete from node_changes where node_id = new.id;
            insert into node_changes (node_id) values (new.id);
        end;
        create trigger nodes_change_up after update of updated_at on nodes begin
            delete from node_changes where node_id = new.id;
            insert into node_changes (node_id) values (new.id);
        end;
        create trigger nodes_change_out after delete on nodes begin
            delete from node_changes where node_id = old.id;
        end;
        alter table brief_marks add column change_seq integer not null default 0;
        update brief_marks set change_seq = coalesce(
            (select max(c.seq) from node_changes c join nodes n on n.id = c.node_id
             where n.updated_at < brief_marks.briefed_at), 0);
"""
# What this version keeps of a note that older ones did not, each note read once more to take it (its bytes
# unchanged, so nothing is news: `sync_sql._apply_one`): its tags (review 21a: parsed and kept nowhere) and the
# insight sections it carries (review 21b: an approved insight written into notes stays approved through them,
# also after the person deleted the insight's own note; a rebuild proposed it as pending again). A recorded
# checksum and size no file can have make the next pass read every note (a note still owed its id line is read
# anyway).
M017_NOTE_EXTRAS = """
        create table insight_sections (
            key text not null,
            node_id text not null references nodes(id) on delete cascade,
            primary key (key, node_id)
        ) without rowid;
        create index insight_sections_node on insight_sections(node_id);
        -- Not the file of a purged node (review 23c): its row is what keeps the note out of the graph.
        update files set checksum = 'read-again-m017', size = -1
        where checksum != 'owed-id' and (node_id is null or node_id in (select id from nodes));
"""
# A note is found by the words of what its frontmatter states (`sync_sql.indexed_name`: its aliases and the
# text of its properties, beside its name and tags, in its whole-note row's name column). The rows are made when
# notes are read, so every note is read once more, as for migration 17: the same bytes, no news.
M018_PROPERTY_WORDS = """
        -- A file still marked by migration 17 keeps its mark: its node's tags were not kept before (review 23c:
        -- `sync_sql._apply_one` must not take them for news). Nor the file of a purged node.
        update files set checksum = 'read-again-m018', size = -1
        where checksum not in ('owed-id', 'read-again-m017')
            and (node_id is null or node_id in (select id from nodes));
"""
# Chinese, Japanese and Korean text is indexed as pairs of characters (`server.store.cjk`: a run of such
# characters was one token, found by nothing but the whole run). The rows holding such text are taken out and
# put back in the new form by `passages_sql.respace_cjk_rows`; no other row changes. No statement of its own.
M019_CJK_PAIRS = """
"""
# A brief's record of the versions it covered holds the node's change number too (`brief_sql._FINGERPRINT`):
# the records made before it, of versions still current, are given theirs, so they stay covered.
M020_BRIEF_SEEN_CHANGES = """
        -- Records made before a version's path was part of them are given it first (review 23c).
        update brief_seen set fingerprint = fingerprint || ' ' || coalesce(
            (select n.path from nodes n where n.id = brief_seen.node_id), '')
        where fingerprint = (
            select n.status || ' ' || coalesce(n.checksum, '') || ' ' || length(n.properties)
            from nodes n where n.id = brief_seen.node_id);
        update brief_seen set fingerprint = fingerprint || ' ' || coalesce(
            (select c.seq from node_changes c where c.node_id = brief_seen.node_id), '')
        where fingerprint = (
            select n.status || ' ' || coalesce(n.checksum, '') || ' ' || length(n.properties) || ' '
                || coalesce(n.path, '')
            from nodes n where n.id = brief_seen.node_id);
"""
# Tool writes the lease holder keeps against an editor's older copy (`vault_sync.writer.KeptWrite`), recorded
# so that a process taking the vault over after the holder died keeps them too (`kept_sql`). Rows live seconds.
M021_KEPT_WRITES = """
        create table kept_writes (
            path text primary key,          -- vault-relative path of the note written
            note_id text,                   -- the engrama_id line it held as written
            base blob not null,             -- its bytes before the write
            written blob not null,          -- and after it
            written_at real not null,       -- unix time of the write
            until real not null             -- unix time until which the write is kept
        );
"""

MIGRATIONS: tuple[tuple[int, str, str], ...] = (
    (1, "m001_create_graph", M001_CREATE_GRAPH),
    (2, "m002_insight_recorded_at", M002_INSIGHT_RECORDED_AT),
    (3, "m003_search_index", M003_SEARCH_INDEX),
    (4, "m004_temporal", M004_TEMPORAL),
    (5, "m005_outbox", M005_OUTBOX),
    (6, "m006_note_start", M006_NOTE_START),
    (7, "m007_note_links", M007_NOTE_LINKS),
    (8, "m008_brief", M008_BRIEF),
    (9, "m009_passages_once", M009_PASSAGES_ONCE),
    (10, "m010_note_rows_exact", M010_NOTE_ROWS_EXACT),
    (11, "m011_composed_names", M011_COMPOSED_NAMES),
    (12, "m012_file_inodes", M012_FILE_INODES),
    (13, "m013_note_days", M013_NOTE_DAYS),
    (14, "m014_history_ids_once", M014_HISTORY_IDS_ONCE),
    (15, "m015_touched", M015_TOUCHED),
    (16, "m016_node_changes", M016_NODE_CHANGES),
    (17, "m017_note_extras", M017_NOTE_EXTRAS),
    (18, "m018_property_words", M018_PROPERTY_WORDS),
    (19, "m019_cjk_pairs", M019_CJK_PAIRS),
    (20, "m020_brief_seen_changes", M020_BRIEF_SEEN_CHANGES),
    (21, "m021_kept_writes", M021_KEPT_WRITES),
)
# Steps in Python, run after a migration's statements in the same transaction.
STEPS: dict[int, Callable[[Any], None]] = {
    10: passages_sql.fill_note_rows,
    11: lambda conn: sync_sql.compose_names(conn, utc_now()),
    13: nodes_sql.refresh_note_days,
    19: passages_sql.respace_cjk_rows,
}


def split_statements(script: str) -> list[str]:
    """Split a script into complete statements (trigger bodies keep their inner semicolons)."""
    statements, buffer = [], ""
    for line in script.splitlines(keepends=True):
        buffer += line
        if sqlean.complete_statement(buffer):
            statements.append(buffer.strip())
            buffer = ""
    if buffer.strip():
        raise ValueError(f"incomplete statement at the end of a migration: {buffer.strip()[:60]}")
    return statements


class NewerDatabase(Exception):
    """The database was upgraded by a newer engrama-vault: it records migrations this version does not know,
    whose tables and triggers this version would use wrongly."""

    def __init__(self, newest: int, known: int) -> None:
        super().__init__(f"schema {newest}; this version knows up to {known}")
        self.newest = newest
        self.known = known


def apply_migrations(conn: Any) -> int:
    """Apply the migrations not yet recorded; returns how many ran. A second call is a no-op. Raises
    NewerDatabase, changing nothing, when the file records a migration newer than this version's last.

    Statements run one by one inside BEGIN IMMEDIATE (executescript() would commit early), and the list of
    applied migrations is re-read under that lock, so two processes opening a new file at once are safe.
    """
    # BEGIN IMMEDIATE takes the write lock first (waiting for it): a bare write that starts as a read and then
    # upgrades can get SQLITE_BUSY at once when another process is migrating the same new file.
    passages_sql.register_functions(conn)
    if not _behind(conn):
        return 0
    (usual,) = conn.execute("pragma busy_timeout").fetchone()
    log.info("bringing the database up to this version (on a large vault this may take a minute)")
    conn.execute(f"pragma busy_timeout = {max(int(usual), UPGRADE_WAIT_MS)}")
    try:
        return _upgrade(conn)
    finally:
        conn.execute(f"pragma busy_timeout = {int(usual)}")


def _behind(conn: Any) -> bool:
    """Whether the database lacks a migration of this version (read without a lock: WAL lets a reader in while
    another process writes). A newer database counts, so that `_upgrade` says so."""
    try:
        (newest,) = conn.execute("select max(number) from schema_migrations").fetchone()
    except sqlean.OperationalError:  # no such table: a new file
        return True
    if newest != MIGRATIONS[-1][0]:
        return True
    (count,) = conn.execute("select count(*) from schema_migrations").fetchone()
    return count < len(MIGRATIONS)


def _upgrade(conn: Any) -> int:
    conn.execute("begin immediate")
    conn.execute(
        "create table if not exists schema_migrations (number integer primary key, name text, applied_at text)"
    )
    conn.execute("commit")
    (newest,) = conn.execute("select max(number) from schema_migrations").fetchone()
    if newest is not None and newest > MIGRATIONS[-1][0]:
        raise NewerDatabase(newest, MIGRATIONS[-1][0])
    ran = 0
    for number, name, script in MIGRATIONS:
        conn.execute("begin immediate")
        try:
            if conn.execute("select 1 from schema_migrations where number = ?", (number,)).fetchone() is None:
                for statement in split_statements(script):
                    conn.execute(statement)
                if (step := STEPS.get(number)) is not None:
                    step(conn)
                conn.execute(
                    "insert into schema_migrations values (?, ?, strftime('%Y-%m-%dT%H:%M:%SZ', 'now'))",
                    (number, name),
                )
                ran += 1
        except BaseException:
            conn.execute("rollback")
            raise
        conn.execute("commit")
        if (
            number == 9
            and ran
            and conn.execute(
                "select applied_at >= strftime('%Y-%m-%dT%H:%M:%SZ', 'now', '-1 minute') from schema_migrations "
                "where number = 9"
            ).fetchone()[0]
        ):
            passages_sql.compact_after_upgrade(conn)
    return ran
