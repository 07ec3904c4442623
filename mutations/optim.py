"""optim bugs."""
