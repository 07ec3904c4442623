# Prints its validation numbers in a shape of its own that no built-in reading takes
# ("[epoch 2] holdout-nll 0.41 / score 91.0"): the user names it with loop.metrics.
import argparse

from digits import evaluate, load, make_model, train_epoch

parser = argparse.ArgumentParser()
parser.add_argument("--epochs", type=int, default=3)
args = parser.parse_args()

train, val = load()
model, optimizer, criterion = make_model()
for epoch in range(args.epochs):
    train_epoch(model, optimizer, criterion, train)
    nll, accuracy = evaluate(model, criterion, val)
    print(f"[epoch {epoch}] holdout-nll {nll:.4f} / score {100 * accuracy:.1f}")
