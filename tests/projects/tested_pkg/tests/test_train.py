import math

import torch

from tinynet.model import MLP
from tinynet.train import fit, make_data


def test_fit_returns_finite_losses():
    torch.manual_seed(0)
    x, y = make_data(64)
    losses = fit(MLP(4, 8, 3), x, y, epochs=2)
    assert len(losses) == 4
    assert all(math.isfinite(loss) for loss in losses)
