import torch

from tinynet.model import MLP


def test_output_shape():
    model = MLP(4, 8, 3)
    assert model(torch.zeros(5, 4)).shape == (5, 3)
