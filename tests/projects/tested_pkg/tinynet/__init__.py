"""A tiny classifier with its training code and its own tests."""
