"""One exception type for every user-facing error: the CLI prints its message on one line."""


class TaskextrapError(ValueError):
    """Bad input or an impossible request; the message is one line and says what to change."""


class TaskextrapWarning(UserWarning):
    """Something was repaired on the way (a damaged cache file recomputed); the CLI prints its
    message on one line."""
