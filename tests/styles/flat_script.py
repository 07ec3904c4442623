"""A flat training script: no functions, everything at module level (a notebook exported)."""

import torch
import torch.nn as nn
import torch.optim as optim
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)
device = "cpu"
X = torch.randn(512, 20)
y = (X[:, 0] + X[:, 1] > 0).long()
X_train, y_train, X_val, y_val = X[:400], y[:400], X[400:], y[400:]
mean, std = X_train.mean(0), X_train.std(0) + 1e-8
X_train = (X_train - mean) / std
X_val = (X_val - mean) / std
train_loader = DataLoader(TensorDataset(X_train, y_train), batch_size=32, shuffle=True)
val_loader = DataLoader(TensorDataset(X_val, y_val), batch_size=128)

model = nn.Sequential(nn.Linear(20, 64), nn.ReLU(), nn.Dropout(0.1), nn.Linear(64, 2)).to(device)
criterion = nn.CrossEntropyLoss()
opt = optim.Adam(model.parameters(), lr=1e-3)

for epoch in range(3):
    model.train()
    total = 0.0
    for xb, yb in train_loader:
        xb, yb = xb.to(device), yb.to(device)
        opt.zero_grad()
        out = model(xb)
        loss = criterion(out, yb)
        loss.backward()
        opt.step()
        total += loss.item()
    model.eval()
    correct = 0
    with torch.no_grad():
        for xb, yb in val_loader:
            xb, yb = xb.to(device), yb.to(device)
            correct += (model(xb).argmax(1) == yb).sum().item()
    print(f"epoch {epoch} loss {total / len(train_loader):.3f} acc {correct / len(X_val):.3f}")
