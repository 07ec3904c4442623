"""A correct little training script: the harness's smoke test and reference."""

from tiny_common import parse, train

if __name__ == "__main__":
    train(parse())
