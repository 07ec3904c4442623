"""Fine-tuning as tabular/vision tutorials write it: k folds (a fresh model and optimizer per
fold, batch loops written inline), a learning-rate sweep that reloads the initial weights,
linear warmup through LambdaLR stepped per epoch, ReduceLROnPlateau on the validation loss,
and the backbone unfrozen at one epoch with the optimizer rebuilt for it."""

import copy

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset

FOLDS = 3
EPOCHS = 4
MOMENTUM = 0.9
WARMUP_EPOCHS = 2
UNFREEZE_EPOCH = 2
LRS = (0.05, 0.01)


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.backbone = nn.Sequential(nn.Linear(10, 32), nn.ReLU())
        self.head = nn.Linear(32, 3)

    def forward(self, x):
        return self.head(self.backbone(x))


def validate(model, loader, criterion):
    model.eval()
    total = 0.0
    with torch.no_grad():
        for x, y in loader:
            total += criterion(model(x), y).item() * len(y)
    return total / len(loader.dataset)


def main():
    torch.manual_seed(0)
    x = torch.randn(300, 10)
    y = x[:, :3].argmax(dim=1)
    fold_of = torch.arange(len(x)) % FOLDS
    criterion = nn.CrossEntropyLoss()
    loader_kwargs = {"batch_size": 32, "num_workers": 0}
    for fold in range(FOLDS):
        train_set = TensorDataset(x[fold_of != fold], y[fold_of != fold])
        val_set = TensorDataset(x[fold_of == fold], y[fold_of == fold])
        train_loader = DataLoader(train_set, shuffle=True, **loader_kwargs)
        val_loader = DataLoader(val_set, **loader_kwargs)
        model = Net()
        model.backbone.requires_grad_(False)
        optimizer = torch.optim.SGD(model.head.parameters(), lr=0.05, momentum=MOMENTUM)
        warmup = torch.optim.lr_scheduler.LambdaLR(
            optimizer, lambda e: min(1.0, (e + 1) / WARMUP_EPOCHS)
        )
        plateau = torch.optim.lr_scheduler.ReduceLROnPlateau(optimizer, patience=1)
        for epoch in range(EPOCHS):
            if epoch == UNFREEZE_EPOCH:
                model.backbone.requires_grad_(True)
                optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=MOMENTUM)
                plateau = torch.optim.lr_scheduler.ReduceLROnPlateau(optimizer, patience=1)
            model.train()
            for xb, yb in train_loader:
                optimizer.zero_grad()
                loss = criterion(model(xb), yb)
                loss.backward()
                optimizer.step()
            if epoch < UNFREEZE_EPOCH:
                warmup.step()
            val_loss = validate(model, val_loader, criterion)
            plateau.step(val_loss)
        print(f"fold {fold} val loss {val_loss:.4f}")

    # A learning-rate sweep: every run starts from the same weights.
    model = Net()
    initial = copy.deepcopy(model.state_dict())
    loader = DataLoader(TensorDataset(x, y), shuffle=True, **loader_kwargs)
    for lr in LRS:
        model.load_state_dict(initial)
        optimizer = torch.optim.SGD(model.parameters(), lr=lr, momentum=MOMENTUM)
        model.train()
        for epoch in range(EPOCHS):
            for xb, yb in loader:
                optimizer.zero_grad()
                criterion(model(xb), yb).backward()
                optimizer.step()
        print(f"lr {lr} final loss {validate(model, loader, criterion):.4f}")


if __name__ == "__main__":
    main()
