"""Training, validation and prediction: a ``Trainer`` with ``fit()``, ``evaluate()`` and
``predict()``; the learning rate halves when the validation loss stops improving."""

import torch
from torch import nn
from torch.optim.lr_scheduler import ReduceLROnPlateau
from torch.utils.data import DataLoader, TensorDataset


def make_data(
    n: int = 240, n_features: int = 8, seed: int = 0
) -> tuple[torch.Tensor, torch.Tensor]:
    """Three Gaussian blobs, shifted and scaled away from the origin as raw features are."""
    generator = torch.Generator().manual_seed(seed)
    y = torch.arange(n) % 3
    centres = torch.randn(3, n_features, generator=generator) * 2.0
    x = centres[y] + torch.randn(n, n_features, generator=generator)
    return 5.0 * x + 10.0, y


def make_loaders(
    x: torch.Tensor,
    y: torch.Tensor,
    batch_size: int = 32,
    val_fraction: float = 0.25,
    seed: int = 0,
) -> tuple[DataLoader, DataLoader]:
    """A shuffled training loader and an ordered validation loader, standardized with the
    training split's statistics."""
    generator = torch.Generator().manual_seed(seed)
    order = torch.randperm(len(x), generator=generator)
    n_val = int(len(x) * val_fraction)
    val, train = order[:n_val], order[n_val:]
    mean, std = x[train].mean(dim=0), x[train].std(dim=0)
    x = (x - mean) / std
    train_loader = DataLoader(
        TensorDataset(x[train], y[train]), batch_size=batch_size, shuffle=True
    )
    val_loader = DataLoader(TensorDataset(x[val], y[val]), batch_size=batch_size)
    return train_loader, val_loader


class Trainer:
    def __init__(
        self,
        model: nn.Module,
        lr: float = 0.05,
        momentum: float = 0.9,
        weight_decay: float = 1e-4,
        patience: int = 2,
        factor: float = 0.5,
    ) -> None:
        self.model = model
        self.criterion = nn.CrossEntropyLoss()
        self.optimizer = torch.optim.SGD(
            model.parameters(), lr=lr, momentum=momentum, weight_decay=weight_decay
        )
        self.scheduler = ReduceLROnPlateau(
            self.optimizer, mode="min", factor=factor, patience=patience
        )
        self.history: list[dict[str, float]] = []

    def train_epoch(self, loader: DataLoader) -> float:
        self.model.train()
        total, seen = 0.0, 0
        for x, y in loader:
            self.optimizer.zero_grad()
            loss = self.criterion(self.model(x), y)
            loss.backward()
            self.optimizer.step()
            total += loss.item() * len(y)
            seen += len(y)
        return total / seen

    def evaluate(self, loader: DataLoader) -> float:
        """The mean validation loss."""
        self.model.eval()
        total, seen = 0.0, 0
        with torch.no_grad():
            for x, y in loader:
                total += self.criterion(self.model(x), y).item() * len(y)
                seen += len(y)
        return total / seen

    def fit(
        self, train_loader: DataLoader, val_loader: DataLoader | None = None, epochs: int = 10
    ) -> list[dict[str, float]]:
        """Train for ``epochs``; after each, the scheduler sees the validation loss (the
        training loss when there is no validation loader). Returns the history."""
        for _ in range(epochs):
            train_loss = self.train_epoch(train_loader)
            val_loss = self.evaluate(val_loader) if val_loader is not None else train_loss
            self.scheduler.step(val_loss)
            lr = self.optimizer.param_groups[0]["lr"]
            self.history.append({"train_loss": train_loss, "val_loss": val_loss, "lr": lr})
        return self.history

    def predict(self, x: torch.Tensor, batch_size: int = 256) -> torch.Tensor:
        """Class probabilities for ``x``."""
        self.model.eval()
        with torch.no_grad():
            logits = torch.cat([self.model(chunk) for chunk in x.split(batch_size)])
        return torch.softmax(logits, dim=1)
