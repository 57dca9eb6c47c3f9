"""Errors the services raise for calls that cannot work; each message says how to fix the call."""

from __future__ import annotations


class ServiceError(ValueError):
    """A call the caller can fix (an unknown label, a missing entity, an unusable value)."""


class UnknownLabel(ServiceError):
    """The label is not defined by the active profile."""


class UnknownRelation(ServiceError):
    """The relation type is not defined by the active profile."""


class RelationNotAllowed(ServiceError):
    """The profile does not let this relation connect these two labels."""


class EntityNotFound(ServiceError):
    """No entity has that name (and label)."""


class NoteNotFound(ServiceError):
    """No note file at the given vault path."""
