"""Domain errors of reflect and insights. Each is a ValueError whose message says what to do next."""


class InsightError(ValueError):
    """Base class for everything reflect and the insight tools refuse."""


class ReflectError(InsightError):
    """`reflect` was asked for a pattern that does not exist."""


class InsightNotFound(InsightError):
    """No insight has the given id."""


class InsightNotApproved(InsightError):
    """Only approved insights are written into notes."""


class InsightAlreadyDecided(InsightError):
    """The insight was already approved or dismissed the other way; the vault record is where to change it."""


class InsightWriteError(InsightError):
    """An insight cannot be written where it was asked to go (no vault, bad target, unreadable note)."""
