"""Mixed precision the documented way: float16 autocast, a GradScaler, unscale_ before
clipping, OneCycleLR stepped per batch, an optimizer rebuilt per fold of a k-fold loop."""

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

EPOCHS = 3
LR = 3e-4
MAX_NORM = 1.0
FOLDS = 3


def make_model() -> nn.Module:
    return nn.Sequential(nn.Linear(16, 64), nn.GELU(), nn.Linear(64, 4))


def train_fold(model, loader, device, use_amp):
    optimizer = torch.optim.AdamW(model.parameters(), lr=LR, weight_decay=0.01)
    scheduler = torch.optim.lr_scheduler.OneCycleLR(
        optimizer, max_lr=LR * 10, total_steps=EPOCHS * len(loader)
    )
    scaler = torch.cuda.amp.GradScaler(enabled=use_amp)
    for epoch in range(EPOCHS):
        model.train()
        for x, y in loader:
            x, y = x.to(device), y.to(device)
            optimizer.zero_grad(set_to_none=True)
            with torch.autocast(device_type=device.type, dtype=torch.float16, enabled=use_amp):
                loss = F.cross_entropy(model(x), y)
            scaler.scale(loss).backward()
            scaler.unscale_(optimizer)
            nn.utils.clip_grad_norm_(model.parameters(), MAX_NORM)
            scaler.step(optimizer)
            scaler.update()
            scheduler.step()
        print(f"epoch {epoch} loss {loss.item():.4f}")


@torch.no_grad()
def evaluate(model, loader, device):
    model.eval()
    correct = total = 0
    for x, y in loader:
        x, y = x.to(device), y.to(device)
        correct += (model(x).argmax(dim=1) == y).sum().item()
        total += y.numel()
    return correct / total


def main():
    torch.manual_seed(0)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    x = torch.randn(600, 16)
    y = (x[:, :4].argmax(dim=1)).long()
    folds = torch.arange(len(x)) % FOLDS
    for fold in range(FOLDS):
        train = TensorDataset(x[folds != fold], y[folds != fold])
        val = TensorDataset(x[folds == fold], y[folds == fold])
        train_loader = DataLoader(train, batch_size=32, shuffle=True)
        val_loader = DataLoader(val, batch_size=128)
        model = make_model().to(device)
        train_fold(model, train_loader, device, use_amp=device.type == "cuda")
        print(f"fold {fold} accuracy {evaluate(model, val_loader, device):.3f}")


if __name__ == "__main__":
    main()
