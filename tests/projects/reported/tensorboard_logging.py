# Logs to TensorBoard the way tutorials do: add_scalar("Loss/train", ...) every few
# steps, add_scalar("Loss/val") and add_scalar("Accuracy/val") after each epoch, and
# add_scalars("loss", {"train": ..., "val": ...}). Prints nothing about validation.
import argparse
import itertools

from torch.utils.tensorboard import SummaryWriter

from digits import evaluate, load, make_model, train_epoch

parser = argparse.ArgumentParser()
parser.add_argument("--epochs", type=int, default=3)
parser.add_argument("--logdir", default="runs/digits")
args = parser.parse_args()

train, val = load()
model, optimizer, criterion = make_model()
writer = SummaryWriter(args.logdir)
steps = itertools.count()


def log_train(loss):
    step = next(steps)
    if step % 5 == 0:
        writer.add_scalar("Loss/train", loss.item(), step)


for epoch in range(args.epochs):
    train_loss = train_epoch(model, optimizer, criterion, train, on_step=log_train)
    val_loss, accuracy = evaluate(model, criterion, val)
    writer.add_scalar("Loss/val", val_loss, epoch)
    writer.add_scalar("Accuracy/val", accuracy, epoch)
    writer.add_scalars("loss", {"train": train_loss, "val": val_loss}, epoch)
    writer.add_scalar("lr", optimizer.param_groups[0]["lr"], epoch)
writer.close()
print("done")
