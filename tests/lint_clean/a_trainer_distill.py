"""A trainer class that owns its optimizer and a per-batch OneCycle schedule (built in
__init__ from a config dict), bfloat16 autocast without a GradScaler, evaluation under
inference_mode, a teacher whose logits are computed under no_grad for distillation, an
EMA copy of the student, an auxiliary loss backpropagated through a shared graph with
retain_graph=True, and an LBFGS fit of a calibration temperature with a closure."""

import copy

import torch
import torch.nn as nn
import torch.nn.functional as F

CONFIG = {"lr": 3e-3, "epochs": 2, "batch_size": 32, "temperature": 2.0, "ema_decay": 0.99}


def create_model(width):
    return nn.Sequential(nn.Linear(12, width), nn.ReLU(), nn.Linear(width, 4))


class DistillTrainer:
    def __init__(self, student, teacher, batches, config):
        self.student, self.teacher, self.batches = student, teacher, batches
        self.config = config
        self.ema = copy.deepcopy(student).requires_grad_(False)
        self.optimizer = torch.optim.AdamW(student.parameters(), lr=config["lr"])
        self.scheduler = torch.optim.lr_scheduler.OneCycleLR(
            self.optimizer, max_lr=config["lr"], total_steps=config["epochs"] * len(batches)
        )

    def train_step(self, x, y):
        self.optimizer.zero_grad(set_to_none=True)
        with torch.no_grad():
            teacher_logits = self.teacher(x)
        with torch.autocast(device_type="cpu", dtype=torch.bfloat16):
            logits = self.student(x)
        logits = logits.float()
        t = self.config["temperature"]
        distill = F.kl_div(
            F.log_softmax(logits / t, dim=1), F.softmax(teacher_logits / t, dim=1),
            reduction="batchmean",
        )
        hard = F.cross_entropy(logits, y)
        distill.backward(retain_graph=True)
        hard.backward()
        self.optimizer.step()
        self.scheduler.step()
        with torch.no_grad():
            for ema_p, p in zip(self.ema.parameters(), self.student.parameters()):
                ema_p.mul_(self.config["ema_decay"]).add_(p.detach(), alpha=1 - self.config["ema_decay"])
        return hard.item()

    def fit(self):
        for epoch in range(self.config["epochs"]):
            self.student.train()
            losses = [self.train_step(x, y) for x, y in self.batches]
            print(f"epoch {epoch} loss {sum(losses) / len(losses):.4f} acc {self.evaluate():.3f}")

    @torch.inference_mode()
    def evaluate(self):
        self.ema.eval()
        correct = sum((self.ema(x).argmax(1) == y).sum().item() for x, y in self.batches)
        return correct / sum(len(y) for _, y in self.batches)


def fit_temperature(model, batches):
    temperature = nn.Parameter(torch.ones(1))
    optimizer = torch.optim.LBFGS([temperature], lr=0.01, max_iter=50)
    with torch.no_grad():
        logits = torch.cat([model(x) for x, _ in batches])
    labels = torch.cat([y for _, y in batches])

    def closure():
        optimizer.zero_grad()
        loss = F.cross_entropy(logits / temperature, labels)
        loss.backward()
        return loss

    optimizer.step(closure)
    return temperature.item()


if __name__ == "__main__":
    torch.manual_seed(0)
    x = torch.randn(256, 12)
    y = x[:, :4].argmax(1)
    batches = list(zip(x.split(CONFIG["batch_size"]), y.split(CONFIG["batch_size"])))
    teacher = create_model(64).eval()
    trainer = DistillTrainer(create_model(16), teacher, batches, CONFIG)
    trainer.fit()
    print(f"temperature {fit_temperature(trainer.ema, batches):.3f}")
