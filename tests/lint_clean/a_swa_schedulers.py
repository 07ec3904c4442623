"""Scheduler spellings from the PyTorch docs: LinearLR warmup chained to CosineAnnealingLR
with SequentialLR (stepped per epoch), SWA with AveragedModel and SWALR after swa_start,
MultiStepLR with milestones in epochs, CosineAnnealingLR over all batches stepped per batch,
and update_bn at the end."""

import torch
import torch.nn as nn
from torch.optim.lr_scheduler import CosineAnnealingLR, LinearLR, MultiStepLR, SequentialLR
from torch.optim.swa_utils import SWALR, AveragedModel, update_bn
from torch.utils.data import DataLoader, TensorDataset

EPOCHS = 6
WARMUP_EPOCHS = 2
SWA_START = 4


def make_model():
    return nn.Sequential(nn.Linear(8, 32), nn.BatchNorm1d(32), nn.ReLU(), nn.Linear(32, 2))


def run_epoch(model, loader, optimizer, criterion, scheduler=None):
    model.train()
    for x, y in loader:
        optimizer.zero_grad()
        loss = criterion(model(x), y)
        loss.backward()
        optimizer.step()
        if scheduler is not None:
            scheduler.step()
    return loss.item()


def main():
    torch.manual_seed(0)
    x = torch.randn(512, 8)
    y = (x.sum(1) > 0).long()
    loader = DataLoader(TensorDataset(x, y), batch_size=64, shuffle=True)
    criterion = nn.CrossEntropyLoss()

    # Warmup then cosine, per epoch, plus SWA for the last epochs.
    model = make_model()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, nesterov=True)
    warmup = LinearLR(optimizer, start_factor=0.1, total_iters=WARMUP_EPOCHS)
    cosine = CosineAnnealingLR(optimizer, T_max=EPOCHS - WARMUP_EPOCHS)
    scheduler = SequentialLR(optimizer, schedulers=[warmup, cosine], milestones=[WARMUP_EPOCHS])
    swa_model = AveragedModel(model)
    swa_scheduler = SWALR(optimizer, swa_lr=0.05)
    for epoch in range(EPOCHS):
        loss = run_epoch(model, loader, optimizer, criterion)
        if epoch >= SWA_START:
            swa_model.update_parameters(model)
            swa_scheduler.step()
        else:
            scheduler.step()
        print(f"swa run epoch {epoch} loss {loss:.4f}")
    update_bn(loader, swa_model)

    # Milestones in epochs, stepped per epoch.
    model = make_model()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    milestones = MultiStepLR(optimizer, milestones=[EPOCHS // 2], gamma=0.1)
    for epoch in range(EPOCHS):
        run_epoch(model, loader, optimizer, criterion)
        milestones.step()

    # Cosine over every batch, stepped per batch.
    model = make_model()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    per_batch = CosineAnnealingLR(optimizer, T_max=EPOCHS * len(loader))
    for epoch in range(EPOCHS):
        loss = run_epoch(model, loader, optimizer, criterion, per_batch)
    print(f"per-batch cosine final loss {loss:.4f} lr {per_batch.get_last_lr()[0]:.2e}")


if __name__ == "__main__":
    main()
