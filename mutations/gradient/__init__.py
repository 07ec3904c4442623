"""Gradient-flow bugs: gradients that accumulate, vanish, never reach the model or never apply."""
