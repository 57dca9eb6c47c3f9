"""Errors raised while loading schema profiles."""


class ProfileError(ValueError):
    """A profile or module file is missing or invalid; the message names the file, the entry and the fix."""
