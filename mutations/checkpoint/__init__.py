"""Checkpoint bugs: state that is not restored on resume, or not really saved."""
