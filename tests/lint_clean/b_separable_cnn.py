"""Correct: a depthwise-separable CNN (grouped conv straight into a pointwise conv), an
EDSR-style PixelShuffle upsampler without activations, BatchNorm-ReLU blocks, SGD with a
standard decay, an eval pass over the training loader that reports training accuracy."""

import torch
from torch import nn


def separable(c_in, c_out):
    return nn.Sequential(
        nn.Conv2d(c_in, c_in, 3, padding=1, groups=c_in, bias=False),
        nn.Conv2d(c_in, c_out, 1, bias=False),
        nn.BatchNorm2d(c_out),
        nn.ReLU(inplace=True),
    )


class Upsampler(nn.Sequential):
    def __init__(self, n_feats):
        super().__init__(
            nn.Conv2d(n_feats, 4 * n_feats, 3, padding=1),
            nn.PixelShuffle(2),
            nn.Conv2d(n_feats, 4 * n_feats, 3, padding=1),
            nn.PixelShuffle(2),
        )


class Net(nn.Module):
    def __init__(self, num_classes=10):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU())
        self.block1 = separable(16, 32)
        self.block2 = separable(32, 64)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(64, num_classes)

    def forward(self, x):
        x = self.stem(x)
        x = self.block2(self.block1(x))
        x = torch.flatten(self.pool(x), 1)
        return self.fc(x)


def main():
    torch.manual_seed(0)
    model = Net()
    upsampler = Upsampler(8)
    print(upsampler(torch.randn(1, 8, 4, 4)).shape)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-4)
    criterion = nn.CrossEntropyLoss()
    data = [(torch.randn(8, 3, 16, 16), torch.randint(0, 10, (8,))) for _ in range(4)]
    train_loader = torch.utils.data.DataLoader(data, batch_size=None, shuffle=True)
    for epoch in range(2):
        model.train()
        for x, y in train_loader:
            optimizer.zero_grad()
            loss = criterion(model(x), y)
            loss.backward()
            optimizer.step()
        model.eval()
        train_correct = 0
        with torch.no_grad():
            for x, y in train_loader:
                train_correct += (model(x).argmax(1) == y).sum().item()
        print(f"epoch {epoch} train acc {train_correct / 32:.3f}")


if __name__ == "__main__":
    main()
