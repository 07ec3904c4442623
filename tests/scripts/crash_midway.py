"""Raises an exception after a few optimizer steps."""

from tiny_common import parse, train


def explode(step, loss):
    if step == 5:
        raise ValueError("boom at step 5")


if __name__ == "__main__":
    train(parse(), on_step=explode)
