"""Sub-commands of `engrama-vault`; each module has `register(subparsers)`."""

from server.commands import brief, decay, init, reflect, search, serve, status, sync

COMMANDS = (init, status, sync, reflect, decay, serve, brief, search)
