"""The one exception of the algebra."""


class LayoutError(ValueError):
    """An operation of the layout algebra got input for which it has no correct result.

    The message names the violated condition (for example the "stride divisibility
    condition" of composition), so a caller never receives a silently wrong layout.
    """


class LayoutIndexError(LayoutError, IndexError):
    """A mode, an element or a thread outside its range: a LayoutError that is also an
    IndexError, for code written against Python's sequence protocol."""
