"""Mode bugs: train/eval mode switches, gradient tracking during evaluation, evaluation data."""
