"""Trains a few steps, then never ends."""

import time

from tiny_common import parse, train


def stall(step, loss):
    if step == 3:
        while True:
            time.sleep(0.01)


if __name__ == "__main__":
    train(parse(), on_step=stall)
