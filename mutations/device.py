"""device bugs."""
