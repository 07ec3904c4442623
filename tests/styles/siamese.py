"""Siamese network style: one shared tower applied to both inputs of a pair, a contrastive
loss on the Euclidean distance, pairs drawn on the fly by a Dataset."""

import argparse
import random

import torch
import torch.nn.functional as F
from sklearn.datasets import load_digits
from torch import nn
from torch.utils.data import DataLoader, Dataset


class PairDataset(Dataset):
    """Half the pairs share a class (label 0), half do not (label 1)."""

    def __init__(self, images, targets, n_pairs, seed):
        self.images, self.targets, self.n_pairs = images, targets, n_pairs
        self.by_class = {int(c): (targets == c).nonzero().view(-1) for c in targets.unique()}
        self.rng = random.Random(seed)

    def __len__(self):
        return self.n_pairs

    def __getitem__(self, index):
        i = self.rng.randrange(len(self.images))
        same = self.rng.random() < 0.5
        if same:
            pool = self.by_class[int(self.targets[i])]
        else:
            other = self.rng.choice([c for c in self.by_class if c != int(self.targets[i])])
            pool = self.by_class[other]
        j = int(pool[self.rng.randrange(len(pool))])
        label = torch.tensor(0.0 if same else 1.0)
        return self.images[i], self.images[j], label


class SiameseNetwork(nn.Module):
    def __init__(self, embedding_dim=16):
        super().__init__()
        self.cnn = nn.Sequential(
            nn.Conv2d(1, 8, kernel_size=3, padding=1),
            nn.ReLU(inplace=True),
            nn.MaxPool2d(2),
            nn.Conv2d(8, 16, kernel_size=3, padding=1),
            nn.ReLU(inplace=True),
        )
        self.fc = nn.Sequential(nn.Linear(16 * 4 * 4, 64), nn.ReLU(inplace=True), nn.Linear(64, embedding_dim))

    def forward_once(self, x):
        output = self.cnn(x)
        output = output.view(output.size(0), -1)
        return self.fc(output)

    def forward(self, input1, input2):
        return self.forward_once(input1), self.forward_once(input2)


class ContrastiveLoss(nn.Module):
    """Hadsell et al. 2006: pull similar pairs together, push others past the margin."""

    def __init__(self, margin=2.0):
        super().__init__()
        self.margin = margin

    def forward(self, output1, output2, label):
        distance = F.pairwise_distance(output1, output2, keepdim=True).view(-1)
        similar = (1 - label) * distance.pow(2)
        dissimilar = label * torch.clamp(self.margin - distance, min=0.0).pow(2)
        return torch.mean(similar + dissimilar)


def evaluate(net, loader, device, margin):
    net.eval()
    correct = total = 0
    with torch.no_grad():
        for img0, img1, label in loader:
            out0, out1 = net(img0.to(device), img1.to(device))
            predicted = (F.pairwise_distance(out0, out1) > margin / 2).float()
            correct += (predicted == label.to(device)).sum().item()
            total += label.numel()
    return correct / total


def main():
    parser = argparse.ArgumentParser(description="Siamese network on digit pairs")
    parser.add_argument("--epochs", type=int, default=4)
    parser.add_argument("--pairs", type=int, default=2000)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--lr", type=float, default=5e-4)
    parser.add_argument("--margin", type=float, default=2.0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--device", default="cpu")
    args = parser.parse_args()

    torch.manual_seed(args.seed)
    device = torch.device(args.device)
    digits = load_digits()
    images = torch.tensor(digits.data, dtype=torch.float32).view(-1, 1, 8, 8) / 16.0
    targets = torch.tensor(digits.target)
    train_set = PairDataset(images[:1400], targets[:1400], args.pairs, args.seed)
    val_set = PairDataset(images[1400:], targets[1400:], args.pairs // 4, args.seed + 1)
    train_loader = DataLoader(train_set, batch_size=args.batch_size, shuffle=True)
    val_loader = DataLoader(val_set, batch_size=256)

    net = SiameseNetwork().to(device)
    criterion = ContrastiveLoss(margin=args.margin)
    optimizer = torch.optim.Adam(net.parameters(), lr=args.lr)

    for epoch in range(args.epochs):
        net.train()
        running = 0.0
        for img0, img1, label in train_loader:
            img0, img1, label = img0.to(device), img1.to(device), label.to(device)
            optimizer.zero_grad()
            output1, output2 = net(img0, img1)
            loss_contrastive = criterion(output1, output2, label)
            loss_contrastive.backward()
            optimizer.step()
            running += loss_contrastive.item()
        accuracy = evaluate(net, val_loader, device, args.margin)
        print(f"epoch {epoch} train loss {running / len(train_loader):.4f} val acc {accuracy:.3f}")


if __name__ == "__main__":
    main()
