"""Training from an endless stream of batches; the evaluation helper draws random batches
from whatever dataset it is handed through a loader of its own."""

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


def endless(loader):
    while True:
        yield from loader


@torch.no_grad()
def estimate_loss(model, dataset, batches=4):
    loader = DataLoader(dataset, batch_size=128, shuffle=True)
    model.eval()
    losses = []
    for i, (x, y) in enumerate(loader):
        if i == batches:
            break
        losses.append(F.cross_entropy(model(x), y).item())
    model.train()
    return sum(losses) / len(losses)


def main(max_iters=200):
    x = torch.randn(2048, 16)
    y = (x[:, 0] > 0).long()
    train_set = TensorDataset(x[:1536], y[:1536])
    val_set = TensorDataset(x[1536:], y[1536:])
    model = nn.Sequential(nn.Linear(16, 64), nn.ReLU(), nn.Dropout(0.1), nn.Linear(64, 2))
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    batches = endless(DataLoader(train_set, batch_size=32, shuffle=True))
    for it in range(max_iters):
        x_batch, y_batch = next(batches)
        loss = F.cross_entropy(model(x_batch), y_batch)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        if it % 50 == 0:
            print(
                f"iter {it}: train loss {loss.item():.4f} val loss {estimate_loss(model, val_set):.4f}"
            )


if __name__ == "__main__":
    main()
