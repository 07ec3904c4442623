"""Mode bugs: train/eval mode switches and gradient tracking during evaluation."""
