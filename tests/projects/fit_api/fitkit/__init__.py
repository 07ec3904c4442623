"""A small Keras-style trainer: ``Trainer(model).fit(train_loader, val_loader, epochs)``."""

from fitkit.model import MLP
from fitkit.training import Trainer, make_data, make_loaders

__all__ = ["MLP", "Trainer", "make_data", "make_loaders"]
