"""Search building blocks that need no graph store: safe FTS5 queries (and, later, fusion of rankings)."""

from server.search.fts_query import MAX_TOKENS, STOPWORDS, build_match, query_tokens, quote_token

__all__ = ["MAX_TOKENS", "STOPWORDS", "build_match", "query_tokens", "quote_token"]
