# Logs to Weights & Biases like its quickstart: wandb.init(config=...), wandb.log of a
# dict per epoch with train and validation keys, run.finish(). The harness runs it
# offline; nothing is printed about validation.
import argparse

import wandb

from digits import evaluate, load, make_model, train_epoch

parser = argparse.ArgumentParser()
parser.add_argument("--epochs", type=int, default=3)
parser.add_argument("--lr", type=float, default=0.1)
parser.add_argument("--mode", default=None, help="passed to wandb.init (online, offline, disabled)")
args = parser.parse_args()

run = wandb.init(project="digits", mode=args.mode, config={"lr": args.lr, "epochs": args.epochs})
train, val = load()
model, optimizer, criterion = make_model(wandb.config.lr)
for epoch in range(args.epochs):
    train_loss = train_epoch(model, optimizer, criterion, train)
    val_loss, val_acc = evaluate(model, criterion, val)
    wandb.log({"epoch": epoch, "train/loss": train_loss, "val": {"loss": val_loss, "acc": val_acc}})
run.finish()
