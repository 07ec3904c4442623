"""The engine's one error type, in its own module so every engine module can raise it."""


class MutationError(Exception):
    """A problem with the input (syntax error, bad operator) or, for compile failures, the engine."""
