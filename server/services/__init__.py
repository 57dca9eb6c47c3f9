"""Domain services behind the MCP tools: remember, relate, context, ingest and note sync.

Each public function takes the `Runtime` and plain values and returns a frozen dataclass; tool handlers in
`server.tools` only validate, call one of these and convert the result. No SQL here (that is in
`server.store`), and no file writes except through `vault_sync`.
"""
