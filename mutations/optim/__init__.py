"""Optimization bugs: learning rate, schedule, optimizer choice and state, batch size."""
