"""Domain errors of the vault side. Each message says what the person or the caller should do next."""


class VaultError(Exception):
    """Base class for everything the vault side refuses or cannot do."""


class MalformedNote(VaultError):
    """A note whose frontmatter cannot be parsed; it is reported and left alone."""


class IdLineRefused(MalformedNote):
    """A note that parses but whose frontmatter cannot take an `engrama_id:` line (JSON, a one-line mapping)."""


class UnreadableNote(VaultError):
    """A note that cannot be read as UTF-8 text (binary, bad encoding, permission, too large)."""


class PathOutsideVault(VaultError):
    """A path that is absolute, climbs out with `..`, or follows a symlink out of the vault."""


class NoteReadOnly(VaultError):
    """A note the person made read-only (no one may write it): engrama does not write into it either."""


class NoteUnwritable(VaultError):
    """The note can be read but the file system refuses to write it: a read-only mount, a folder this user may
    not write, a note locked or made immutable. Like a read-only note, it is indexed without its id line."""


class ConcurrentEdit(VaultError):
    """The file changed between our read and our write, and re-basing did not converge."""


class NoteInConflict(VaultError):
    """A note holding an unresolved merge conflict (git's `<<<<<<<` / `=======` / `>>>>>>>` lines): engrama
    writes nothing into it, not even its id line, until the person has resolved it."""


class StoreTrouble(Exception):
    """The graph's store cannot take writes now for a reason of its own disk or file (full, read-only, an I/O
    error, damaged), whatever is written: every reconcile fails alike until the person fixes it, so the changes
    stay pending and are tried again, however long that takes. The message says what to do."""
