"""Logistic regression trained full-batch through a DataLoader."""

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


def main(epochs=50):
    torch.manual_seed(0)
    features = torch.randn(400, 10)
    labels = (features[:, :3].sum(dim=1) > 0).float()
    train_ds = TensorDataset(features[:300], labels[:300])
    train_loader = DataLoader(train_ds, batch_size=len(train_ds), shuffle=True)
    model = nn.Linear(10, 1)
    criterion = nn.BCEWithLogitsLoss()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.5)
    for _epoch in range(epochs):
        for xb, yb in train_loader:
            optimizer.zero_grad()
            loss = criterion(model(xb).squeeze(1), yb)
            loss.backward()
            optimizer.step()
    with torch.no_grad():
        accuracy = ((model(features[300:]).squeeze(1) > 0).float() == labels[300:]).float().mean()
    print(f"loss {loss.item():.4f} test accuracy {accuracy:.3f}")


if __name__ == "__main__":
    main()
