"""Exits cleanly before training anything."""

import sys

from tiny_common import parse, train

if __name__ == "__main__":
    args = parse()
    sys.exit(0)
    train(args)
