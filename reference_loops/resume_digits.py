"""Handwritten digits with checkpointing: train, stop, restart from the checkpoint, continue.

Task: classify scikit-learn's ``load_digits`` into 10 classes, 80/20 split.
Model: MLP 64 -> 128 -> 10 with Dropout, Adam, a StepLR schedule, ``nn.CrossEntropyLoss``.
After every epoch a full checkpoint (model, optimizer, scheduler, epoch, and the RNG states
of torch, Python and the DataLoader's generator) is written atomically: to a temp file,
then renamed over the old one. At ``--resume-at`` the run stops, and a fresh start (new
model, optimizer, scheduler and loaders, as after a crash) restores everything from the
checkpoint (``torch.load(..., weights_only=True)``) and trains to the end. The resumed loss
curve is bitwise identical to an uninterrupted run (``--resume-at 0``) on CPU.
Checkpoints live in a temporary directory that is removed at exit.
Expected initial loss: ln 10 = 2.303 (balanced classes, small logits at init).
Target: val accuracy >= 0.95.
Default budget: 16 epochs, resume after 8, batch 64, lr 3e-3 times 0.7 every 5 epochs
(about 0.4 s on one CPU thread).

Run: ``python reference_loops/resume_digits.py --epochs 16 --seed 0 --device cpu``
"""

from __future__ import annotations

import argparse
import os
import random
import tempfile

import numpy as np
import torch
from sklearn.datasets import load_digits
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

try:
    from experiments.telemetry import report
except ImportError:  # running without trainwreck installed: metrics go nowhere

    def report(**metrics: float) -> None:
        pass


EPOCHS = 16
BATCH_SIZE = 64
LR = 3e-3
# Not a divisor of the resume epoch (8): a decay falls after the resume point, so a
# schedule restarted on resume (a lost scheduler state) decays at the wrong epochs.
LR_STEP_EPOCHS = 5
LR_GAMMA = 0.7
VAL_FRACTION = 0.2


class MLP(nn.Module):
    def __init__(self, in_features: int = 64, hidden: int = 128, num_classes: int = 10):
        super().__init__()
        self.layers = nn.Sequential(
            nn.Linear(in_features, hidden),
            nn.ReLU(),
            nn.Dropout(0.2),
            nn.Linear(hidden, num_classes),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.layers(x)


def make_loaders(batch_size: int, g: torch.Generator) -> tuple[DataLoader, DataLoader]:
    data = load_digits()
    X = torch.tensor(data.data, dtype=torch.float32) / 16.0  # pixel values 0..16 -> 0..1
    y = torch.tensor(data.target, dtype=torch.long)
    n = len(X)
    n_train = int(n * (1 - VAL_FRACTION))
    perm = torch.randperm(n, generator=g)
    train_idx, val_idx = perm[:n_train], perm[n_train:]
    train_ds = TensorDataset(X[train_idx], y[train_idx])
    val_ds = TensorDataset(X[val_idx], y[val_idx])
    train_loader = DataLoader(train_ds, batch_size=batch_size, shuffle=True, generator=g)
    val_loader = DataLoader(val_ds, batch_size=256, shuffle=False)
    return train_loader, val_loader


def train_one_epoch(
    model: nn.Module,
    loader: DataLoader,
    criterion: nn.Module,
    optimizer: torch.optim.Optimizer,
    device: torch.device,
) -> float:
    model.train()
    total_loss = 0.0
    for x, y in loader:
        x, y = x.to(device), y.to(device)
        optimizer.zero_grad()
        logits = model(x)
        loss = criterion(logits, y)
        loss.backward()
        optimizer.step()
        total_loss += loss.item() * x.size(0)
    return total_loss / len(loader.dataset)


def evaluate(
    model: nn.Module, loader: DataLoader, criterion: nn.Module, device: torch.device
) -> tuple[float, float]:
    model.eval()
    total_loss, correct = 0.0, 0
    with torch.no_grad():
        for x, y in loader:
            x, y = x.to(device), y.to(device)
            logits = model(x)
            total_loss += criterion(logits, y).item() * x.size(0)
            correct += (logits.argmax(dim=1) == y).sum().item()
    n = len(loader.dataset)
    return total_loss / n, correct / n


def save_checkpoint(
    path: str,
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    scheduler: torch.optim.lr_scheduler.LRScheduler,
    epoch: int,
    g: torch.Generator,
) -> None:
    state = {
        "model": model.state_dict(),
        "optimizer": optimizer.state_dict(),
        "scheduler": scheduler.state_dict(),
        "epoch": epoch,
        "torch_rng": torch.get_rng_state(),  # dropout masks
        "loader_rng": g.get_state(),  # shuffling order
        "python_rng": random.getstate(),
        # numpy's global RNG is seeded but never drawn from, so it is not saved.
    }
    if torch.cuda.is_initialized():  # a CPU run has no CUDA RNG to save (asking would start CUDA)
        state["cuda_rng"] = torch.cuda.get_rng_state_all()
    # Write then rename: a crash mid-save leaves the previous checkpoint intact.
    tmp_path = path + ".tmp"
    torch.save(state, tmp_path)
    os.replace(tmp_path, path)


def load_checkpoint(
    path: str,
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    scheduler: torch.optim.lr_scheduler.LRScheduler,
    g: torch.Generator,
) -> int:
    """Restore everything saved by ``save_checkpoint``; returns the last finished epoch."""
    ckpt = torch.load(path, weights_only=True)
    model.load_state_dict(ckpt["model"])
    optimizer.load_state_dict(ckpt["optimizer"])
    scheduler.load_state_dict(ckpt["scheduler"])
    torch.set_rng_state(ckpt["torch_rng"])
    g.set_state(ckpt["loader_rng"])
    random.setstate(ckpt["python_rng"])
    if "cuda_rng" in ckpt:
        torch.cuda.set_rng_state_all(ckpt["cuda_rng"])
    return ckpt["epoch"]


def run(args: argparse.Namespace, last_epoch: int, ckpt_path: str, resume: bool) -> None:
    """One process lifetime: seed, build everything, optionally resume, train to last_epoch."""
    random.seed(args.seed)
    np.random.seed(args.seed)
    torch.manual_seed(args.seed)
    g = torch.Generator().manual_seed(args.seed)
    device = torch.device(args.device)

    train_loader, val_loader = make_loaders(args.batch_size, g)
    model = MLP().to(device)
    criterion = nn.CrossEntropyLoss()
    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=LR_STEP_EPOCHS, gamma=LR_GAMMA)
    start_epoch = 1
    if resume:
        start_epoch = load_checkpoint(ckpt_path, model, optimizer, scheduler, g) + 1
        print(f"resumed from {ckpt_path} at epoch {start_epoch}")

    for epoch in range(start_epoch, last_epoch + 1):
        train_loss = train_one_epoch(model, train_loader, criterion, optimizer, device)
        scheduler.step()
        val_loss, val_acc = evaluate(model, val_loader, criterion, device)
        report(epoch=epoch, train_loss=train_loss, val_loss=val_loss, val_metric=val_acc)
        print(f"epoch {epoch:3d}  train {train_loss:.4f}  val {val_loss:.4f}  acc {val_acc:.3f}")
        save_checkpoint(ckpt_path, model, optimizer, scheduler, epoch, g)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=EPOCHS)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    parser.add_argument("--lr", type=float, default=LR)
    parser.add_argument("--batch-size", type=int, default=BATCH_SIZE)
    parser.add_argument(
        "--resume-at",
        type=int,
        default=None,
        help="stop after this epoch and resume from the checkpoint (default: half-way; 0: never)",
    )
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    resume_at = args.epochs // 2 if args.resume_at is None else args.resume_at
    with tempfile.TemporaryDirectory(prefix="resume_digits_") as ckpt_dir:
        ckpt_path = os.path.join(ckpt_dir, "checkpoint.pt")
        if 0 < resume_at < args.epochs:
            run(args, last_epoch=resume_at, ckpt_path=ckpt_path, resume=False)
            run(args, last_epoch=args.epochs, ckpt_path=ckpt_path, resume=True)
        else:
            run(args, last_epoch=args.epochs, ckpt_path=ckpt_path, resume=False)


if __name__ == "__main__":
    main()
