"""CIFAR-style loaders, one helper per split; the normalisation is a local of the
training helper."""

import torch
import torch.nn.functional as F
import torchvision
import torchvision.transforms as transforms
from torch import nn


def get_train_loader(root, batch_size):
    normalize = transforms.Normalize(mean=[0.4914, 0.4822, 0.4465], std=[0.2470, 0.2435, 0.2616])
    transform_train = transforms.Compose(
        [
            transforms.RandomCrop(32, padding=4),
            transforms.RandomHorizontalFlip(),
            transforms.ToTensor(),
            normalize,
        ]
    )
    train_set = torchvision.datasets.CIFAR10(
        root, train=True, download=True, transform=transform_train
    )
    return torch.utils.data.DataLoader(train_set, batch_size=batch_size, shuffle=True)


def get_test_loader(root, batch_size):
    transform_test = transforms.Compose(
        [
            transforms.ToTensor(),
            transforms.Normalize((0.4914, 0.4822, 0.4465), (0.2470, 0.2435, 0.2616)),
        ]
    )
    test_set = torchvision.datasets.CIFAR10(
        root, train=False, download=True, transform=transform_test
    )
    return torch.utils.data.DataLoader(test_set, batch_size=batch_size, shuffle=False)


def main():
    model = nn.Sequential(nn.Flatten(), nn.Linear(3 * 32 * 32, 256), nn.ReLU(), nn.Linear(256, 10))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    train_loader = get_train_loader("./data", 128)
    test_loader = get_test_loader("./data", 256)
    for inputs, targets in train_loader:
        optimizer.zero_grad()
        loss = F.cross_entropy(model(inputs), targets)
        loss.backward()
        optimizer.step()
    correct = 0
    with torch.no_grad():
        for inputs, targets in test_loader:
            correct += (model(inputs).argmax(1) == targets).sum().item()
    print(f"test accuracy {correct / len(test_loader.dataset):.3f}")


if __name__ == "__main__":
    main()
