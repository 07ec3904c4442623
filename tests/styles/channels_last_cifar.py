"""CIFAR-10 numpy style: images kept channels-last as uint8 arrays (N, H, W, C), as
torchvision's CIFAR10.data holds them, permuted to (N, C, H, W) per batch; a
DistributedSampler built for any world size (1 by default) with set_epoch every epoch."""

import argparse

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from sklearn.datasets import load_digits
from torch.utils.data import DataLoader, Dataset
from torch.utils.data.distributed import DistributedSampler


class NumpyImages(Dataset):
    def __init__(self, data, targets):
        self.data, self.targets = data, targets

    def __len__(self):
        return len(self.data)

    def __getitem__(self, index):
        return torch.from_numpy(self.data[index]), int(self.targets[index])


def colour_digits():
    """8x8 digits painted in three colour channels: uint8, channels last."""
    digits = load_digits()
    gray = digits.images / 16.0
    tint = np.random.RandomState(0).uniform(0.3, 1.0, size=(len(gray), 1, 1, 3))
    data = (gray[..., None] * tint * 255).astype(np.uint8)
    return data, digits.target


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 16, 3, padding=1)
        self.conv2 = nn.Conv2d(16, 32, 3, padding=1)
        self.fc = nn.Linear(32 * 2 * 2, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        return self.fc(torch.flatten(x, 1))


def to_input(images, mean, std):
    x = images.permute(0, 3, 1, 2).float() / 255
    return (x - mean) / std


def main():
    parser = argparse.ArgumentParser(description="channels-last digits, DistributedSampler")
    parser.add_argument("--epochs", type=int, default=4)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--lr", type=float, default=0.05)
    parser.add_argument("--world-size", type=int, default=1)
    parser.add_argument("--rank", type=int, default=0)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    torch.manual_seed(args.seed)
    data, targets = colour_digits()
    train_set = NumpyImages(data[:1400], targets[:1400])
    val_set = NumpyImages(data[1400:], targets[1400:])
    mean = torch.tensor([0.2, 0.2, 0.2]).view(1, 3, 1, 1)
    std = torch.tensor([0.3, 0.3, 0.3]).view(1, 3, 1, 1)
    sampler = DistributedSampler(train_set, num_replicas=args.world_size, rank=args.rank, seed=args.seed)
    train_loader = DataLoader(train_set, batch_size=args.batch_size, sampler=sampler)
    val_loader = DataLoader(val_set, batch_size=256)

    model = Net()
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)
    for epoch in range(args.epochs):
        sampler.set_epoch(epoch)
        model.train()
        total = 0.0
        for images, labels in train_loader:
            optimizer.zero_grad()
            loss = F.cross_entropy(model(to_input(images, mean, std)), labels)
            loss.backward()
            optimizer.step()
            total += loss.item()
        model.eval()
        correct = 0
        with torch.no_grad():
            for images, labels in val_loader:
                correct += (model(to_input(images, mean, std)).argmax(1) == labels).sum().item()
        print(f"epoch {epoch} train loss {total / len(train_loader):.4f} val acc {correct / len(val_set):.3f}")


if __name__ == "__main__":
    main()
