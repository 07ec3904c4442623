"""numerics bugs."""
