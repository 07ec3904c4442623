"""A project that profiles its tests with a tracer of its own: sys.settrace at import and
again before every test (as coverage.py, profilers and hypothesis' explain phase do)."""

import sys
import threading

import pytest

CALLS = {"count": 0}


def profile(frame, event, arg):
    if event == "call":
        CALLS["count"] += 1
    return None


sys.settrace(profile)
threading.settrace(profile)


@pytest.fixture(autouse=True)
def profiled():
    sys.settrace(profile)
    yield
    assert CALLS["count"] > 0
