import math

import torch
from fitkit import MLP, Trainer, make_data, make_loaders


def test_fit_returns_finite_losses():
    torch.manual_seed(0)
    train_loader, val_loader = make_loaders(*make_data())
    history = Trainer(MLP()).fit(train_loader, val_loader, epochs=3)
    assert len(history) == 3
    assert all(math.isfinite(h["train_loss"]) and math.isfinite(h["val_loss"]) for h in history)
