"""The graph store: one SQLite file (nodes, edges, passages with FTS5, sqlite-vec vectors, insights)."""

from server.store.database import Database, VectorSupport
from server.store.graph import GraphStore
from server.store.nodes_sql import Node

__all__ = ["Database", "GraphStore", "Node", "VectorSupport"]
