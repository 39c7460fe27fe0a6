"""The one exception a parser may raise."""


class ParseError(Exception):
    """Tool output that cannot be understood at all; the message says why in words a person can act on."""
