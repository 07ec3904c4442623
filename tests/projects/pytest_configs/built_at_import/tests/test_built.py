"""A model built when the test module is imported (at collection), and a test of it."""

from tinynet.model import MLP

MODEL = MLP(4, 8, 3, p=0.2)


def test_dropout_rate_is_kept():
    assert MODEL.drop.p == 0.2
