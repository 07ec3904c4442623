"""A Lightning-free trainer with callbacks (early stopping, best weights, history) training a
small BatchNorm segmentation net on generated blob masks: BCEWithLogitsLoss plus a soft
Dice term with an epsilon, AdamW, training_step/validation_step methods."""

import argparse
import copy

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


def make_data(n, size, generator):
    """Noisy pictures of one blob each; the mask marks where the blob is above half height."""
    grid = torch.arange(size, dtype=torch.float32)
    centres = torch.rand(n, 2, generator=generator) * (size - 4) + 2
    radius = torch.rand(n, 1, 1, generator=generator) * 2 + 1.5
    dy = (grid[None, :, None] - centres[:, 0, None, None]) ** 2
    dx = (grid[None, None, :] - centres[:, 1, None, None]) ** 2
    blob = torch.exp(-(dy + dx) / (2 * radius**2))
    images = 3.0 * blob + 0.3 * torch.randn(n, size, size, generator=generator) + 5.0
    masks = (blob > 0.5).float()
    return images.unsqueeze(1), masks.unsqueeze(1)


class SegNet(nn.Module):
    def __init__(self, channels=8):
        super().__init__()
        self.encoder = nn.Sequential(
            nn.Conv2d(1, channels, 3, padding=1),
            nn.BatchNorm2d(channels),
            nn.ReLU(inplace=True),
            nn.Conv2d(channels, channels, 3, padding=1),
            nn.BatchNorm2d(channels),
            nn.ReLU(inplace=True),
        )
        self.head = nn.Conv2d(channels, 1, kernel_size=1)

    def forward(self, x):
        features = self.encoder(x)
        return self.head(features)


def dice_loss(logits, masks, eps=1e-6):
    probs = torch.sigmoid(logits)
    intersection = (probs * masks).sum(dim=(1, 2, 3))
    union = probs.sum(dim=(1, 2, 3)) + masks.sum(dim=(1, 2, 3))
    return (1 - (2 * intersection + eps) / (union + eps)).mean()


class Callback:
    def on_epoch_end(self, trainer, epoch, logs):
        pass

    def on_train_end(self, trainer):
        pass


class EarlyStopping(Callback):
    def __init__(self, patience=3):
        self.patience, self.best, self.wait = patience, float("inf"), 0

    def on_epoch_end(self, trainer, epoch, logs):
        if logs["val_loss"] < self.best:
            self.best, self.wait = logs["val_loss"], 0
        else:
            self.wait += 1
            trainer.should_stop = self.wait >= self.patience


class BestWeights(Callback):
    """Keep a copy of the weights of the best epoch and restore them at the end."""

    def __init__(self):
        self.best_loss, self.best_state = float("inf"), None

    def on_epoch_end(self, trainer, epoch, logs):
        if logs["val_loss"] < self.best_loss:
            self.best_loss = logs["val_loss"]
            self.best_state = copy.deepcopy(trainer.model.state_dict())

    def on_train_end(self, trainer):
        trainer.model.load_state_dict(self.best_state)


class History(Callback):
    def on_epoch_end(self, trainer, epoch, logs):
        print(f"epoch {epoch} train loss {logs['loss']:.4f} val loss {logs['val_loss']:.4f}")


class Trainer:
    def __init__(self, model, optimizer, callbacks, device):
        self.model = model.to(device)
        self.optimizer = optimizer
        self.callbacks = callbacks
        self.device = device
        self.criterion = nn.BCEWithLogitsLoss()
        self.should_stop = False

    def training_step(self, images, masks):
        logits = self.model(images)
        return self.criterion(logits, masks) + dice_loss(logits, masks)

    @torch.no_grad()
    def validation_step(self, images, masks):
        logits = self.model(images)
        return self.criterion(logits, masks).item()

    def fit(self, train_loader, val_loader, epochs):
        for epoch in range(epochs):
            self.model.train()
            total = 0.0
            for images, masks in train_loader:
                images, masks = images.to(self.device), masks.to(self.device)
                self.optimizer.zero_grad()
                loss = self.training_step(images, masks)
                loss.backward()
                self.optimizer.step()
                total += loss.item()
            self.model.eval()
            val_losses = [self.validation_step(x.to(self.device), y.to(self.device)) for x, y in val_loader]
            logs = {"loss": total / len(train_loader), "val_loss": sum(val_losses) / len(val_losses)}
            for callback in self.callbacks:
                callback.on_epoch_end(self, epoch, logs)
            if self.should_stop:
                break
        for callback in self.callbacks:
            callback.on_train_end(self)


def main():
    parser = argparse.ArgumentParser(description="segmentation with a callback trainer")
    parser.add_argument("--epochs", type=int, default=6)
    parser.add_argument("--n-images", type=int, default=384)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--lr", type=float, default=3e-3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--device", default="cpu")
    args = parser.parse_args()

    torch.manual_seed(args.seed)
    images, masks = make_data(args.n_images, 12, torch.Generator().manual_seed(args.seed))
    n_train = int(0.75 * len(images))
    mean, std = images[:n_train].mean(), images[:n_train].std()
    images = (images - mean) / (std + 1e-8)
    train_loader = DataLoader(TensorDataset(images[:n_train], masks[:n_train]), batch_size=args.batch_size, shuffle=True)
    val_loader = DataLoader(TensorDataset(images[n_train:], masks[n_train:]), batch_size=128)

    model = SegNet()
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=1e-4)
    trainer = Trainer(model, optimizer, [EarlyStopping(), BestWeights(), History()], torch.device(args.device))
    trainer.fit(train_loader, val_loader, args.epochs)


if __name__ == "__main__":
    main()
