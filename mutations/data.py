"""data bugs."""
