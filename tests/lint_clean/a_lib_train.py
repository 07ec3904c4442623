"""A training entry point whose model, optimizer, scheduler and epoch loop come from another
file (a_lib_models.py beside it), with the loaders built from **kwargs dicts, the model
rebuilt from its best checkpoint for the final test, and a fine-tuning stage with a
fresh optimizer over the reloaded model."""

import copy

import torch
import torch.nn as nn
from a_lib_models import ConvNet, build_optimizer, build_scheduler, train_one_epoch
from torch.utils.data import DataLoader, TensorDataset

EPOCHS = 3
LR = 0.05


@torch.no_grad()
def accuracy(model, loader):
    model.eval()
    hits = sum((model(x).argmax(1) == y).sum().item() for x, y in loader)
    return hits / len(loader.dataset)


def main():
    torch.manual_seed(0)
    images, labels = torch.randn(400, 1, 8, 8), torch.randint(0, 10, (400,))
    train_kwargs = {"batch_size": 32, "shuffle": True}
    test_kwargs = {"batch_size": 100}
    train_loader = DataLoader(TensorDataset(images[:300], labels[:300]), **train_kwargs)
    test_loader = DataLoader(TensorDataset(images[300:], labels[300:]), **test_kwargs)
    criterion = nn.CrossEntropyLoss()

    model = ConvNet()
    optimizer = build_optimizer(model, LR)
    scheduler = build_scheduler(optimizer, EPOCHS * len(train_loader))
    best_acc, best_state = 0.0, None
    for epoch in range(EPOCHS):
        loss = train_one_epoch(model, train_loader, optimizer, scheduler, criterion)
        acc = accuracy(model, test_loader)
        if acc >= best_acc:
            best_acc, best_state = acc, copy.deepcopy(model.state_dict())
        print(f"epoch {epoch} loss {loss:.3f} acc {acc:.3f}")

    model = ConvNet()
    model.load_state_dict(best_state)
    print(f"best checkpoint accuracy {accuracy(model, test_loader):.3f}")

    optimizer = torch.optim.Adam(model.parameters(), lr=1e-4)
    for x, y in train_loader:
        model.train()
        optimizer.zero_grad()
        criterion(model(x), y).backward()
        optimizer.step()
    print(f"fine-tuned accuracy {accuracy(model, test_loader):.3f}")


if __name__ == "__main__":
    main()
