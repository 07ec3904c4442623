"""Trains a few steps, waits (so the trace reaches the disk), then dereferences a null
pointer in native code."""

import ctypes
import time

from tiny_common import parse, train


def fault(step, loss):
    if step == 4:
        time.sleep(0.5)
        ctypes.string_at(0)


if __name__ == "__main__":
    train(parse(), on_step=fault)
