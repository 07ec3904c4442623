"""A project whose conftest moves into the tests' folder and seeds everything, and whose
tests write a file next to themselves (relative to that folder)."""

import os
import random
from pathlib import Path

import pytest
import torch

os.chdir(Path(__file__).parent)
random.seed(0)
torch.manual_seed(0)


@pytest.fixture(autouse=True)
def seeded_and_logged(request):
    torch.manual_seed(0)
    yield
    with open("last_test.txt", "w") as handle:  # relative: the tests' folder
        handle.write(request.node.nodeid)
