"""mode bugs."""
