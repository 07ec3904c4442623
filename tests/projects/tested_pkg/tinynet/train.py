"""Training and evaluation of the MLP on tensors held in memory."""

import torch
from torch import nn

from tinynet.model import MLP


def make_data(n: int = 96, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    x = torch.randn(n, 4, generator=generator)
    y = (x[:, 0] + x[:, 1] > 0).long() + (x[:, 2] > 1).long()
    return x, y


def train_step(model, x, y, optimizer, criterion) -> float:
    model.train()
    optimizer.zero_grad()
    loss = criterion(model(x), y)
    loss.backward()
    optimizer.step()
    return loss.item()


def fit(model, x, y, epochs: int = 20, lr: float = 0.05, batch_size: int = 32) -> list[float]:
    optimizer = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9)
    criterion = nn.CrossEntropyLoss()
    losses = []
    for _ in range(epochs):
        order = torch.randperm(len(x))
        for start in range(0, len(x), batch_size):
            batch = order[start : start + batch_size]
            losses.append(train_step(model, x[batch], y[batch], optimizer, criterion))
    return losses


@torch.no_grad()
def accuracy(model, x, y) -> float:
    model.eval()
    return (model(x).argmax(dim=1) == y).float().mean().item()


def finetune(model, x, y, steps: int = 10) -> None:
    """Fine-tune the last layer only (not used by the tests)."""
    optimizer = torch.optim.Adam(model.out.parameters(), lr=1e-3)
    criterion = nn.CrossEntropyLoss()
    for _ in range(steps):
        optimizer.zero_grad()
        criterion(model(x), y).backward()
        optimizer.step()


def main() -> None:
    torch.manual_seed(0)
    x, y = make_data()
    model = MLP(4, 16, 3)
    fit(model, x, y)
    print(f"accuracy {accuracy(model, x, y):.3f}")


if __name__ == "__main__":
    main()
