"""A learning rate so large that the loss overflows to inf/NaN and training goes on."""

import sys

from tiny_common import parse, train

if __name__ == "__main__":
    train(parse([*sys.argv[1:], "--lr", "1e30"]))
