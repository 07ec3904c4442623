"""A trainer class: state on self, the step as a method, AdamW with a cosine schedule."""

from torch import nn, optim
import torch


class Net(nn.Module):
    def __init__(self, n_in: int, n_out: int) -> None:
        super().__init__()
        self.fc1 = nn.Linear(n_in, 32)
        self.fc2 = nn.Linear(32, n_out)

    def forward(self, x):
        h = torch.relu(self.fc1(x))
        return self.fc2(h)


class Trainer:
    def __init__(self, model: nn.Module, device: str = "cpu") -> None:
        self.device = device
        self.model = model.to(device)
        self.criterion = nn.CrossEntropyLoss()
        self.optimizer = optim.AdamW(self.model.parameters(), lr=3e-3, weight_decay=0.01)
        self.scheduler = optim.lr_scheduler.CosineAnnealingLR(self.optimizer, T_max=50)

    def train_step(self, x, y) -> float:
        self.model.train()
        x, y = x.to(self.device), y.to(self.device)
        self.optimizer.zero_grad(set_to_none=True)
        loss = self.criterion(self.model(x), y)
        loss.backward()
        nn.utils.clip_grad_norm_(self.model.parameters(), max_norm=1.0)
        self.optimizer.step()
        self.scheduler.step()
        return loss.item()

    @torch.no_grad()
    def evaluate(self, x, y) -> float:
        self.model.eval()
        logits = self.model(x.to(self.device))
        return (logits.argmax(-1) == y.to(self.device)).float().mean().item()


if __name__ == "__main__":
    torch.manual_seed(0)
    x = torch.randn(256, 8)
    y = (x.sum(1) > 0).long()
    trainer = Trainer(Net(8, 2))
    for step in range(50):
        trainer.train_step(x, y)
    print("val acc", trainer.evaluate(x, y))
