# A LightningModule as in Lightning's docs: self.log("train_loss") in training_step,
# self.log("val_loss") and self.log_dict({"val_acc": ...}) in validation_step (once per
# batch; Lightning averages them per epoch), Trainer(max_epochs=...).fit().
import argparse

import lightning as L
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset

from digits import load

parser = argparse.ArgumentParser()
parser.add_argument("--epochs", type=int, default=3)
args = parser.parse_args()


class DigitsClassifier(L.LightningModule):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 10))
        self.criterion = nn.CrossEntropyLoss()

    def training_step(self, batch, batch_idx):
        x, y = batch
        loss = self.criterion(self.net(x), y)
        self.log("train_loss", loss)
        return loss

    def validation_step(self, batch, batch_idx):
        x, y = batch
        logits = self.net(x)
        self.log("val_loss", self.criterion(logits, y), batch_size=len(y))
        self.log_dict({"val_acc": (logits.argmax(1) == y).float().mean()}, batch_size=len(y))

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.1, momentum=0.9)


(x_train, y_train), (x_val, y_val) = load()
train = DataLoader(TensorDataset(x_train, y_train), batch_size=64, shuffle=True)
val = DataLoader(TensorDataset(x_val, y_val), batch_size=100)
trainer = L.Trainer(max_epochs=args.epochs, logger=False, enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False, accelerator="cpu")
trainer.fit(DigitsClassifier(), train, val)
