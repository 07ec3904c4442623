"""loss bugs."""
