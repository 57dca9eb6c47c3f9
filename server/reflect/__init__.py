"""Reflect: find patterns across the graph, propose Insights, and write approved ones back into notes.

The public face is `server.reflect.service`; the patterns live in `connections` and `upkeep`.
"""
