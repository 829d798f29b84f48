"""One exception type for every user-facing error: the CLI prints its message on one line."""


class TaskextrapError(ValueError):
    """Bad input or an impossible request; the message is one line and says what to change."""


class TaskextrapWarning(UserWarning):
    """Something was repaired on the way (a damaged cache file recomputed); the CLI prints its
    message on one line."""


def did_you_mean(value, choices) -> str:
    """``"; did you mean 'x'?"`` for the choice closest to a mistyped ``value`` (difflib, cutoff
    0.6), or ``""`` when none is close: appended to an "unknown ..." error."""
    import difflib

    if not isinstance(value, str):
        return ""
    close = difflib.get_close_matches(value, [str(c) for c in choices], n=1, cutoff=0.6)
    return f"; did you mean {close[0]!r}?" if close else ""
