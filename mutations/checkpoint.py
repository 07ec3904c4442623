"""checkpoint bugs."""
