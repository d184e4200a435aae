"""The one exception of the algebra."""


class LayoutError(ValueError):
    """An operation of the layout algebra got input for which it has no correct result.

    The message names the violated condition (for example the "stride divisibility
    condition" of composition), so a caller never receives a silently wrong layout.
    """
