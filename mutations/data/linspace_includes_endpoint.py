"""The ``linspace_includes_endpoint`` operator (LinspaceIncludesEndpoint)."""

from __future__ import annotations

import libcst as cst

from mutator.context import Context
from mutator.operator import Example, Replacement, Swap
from mutator.semantics import find_arg, is_false, resolve, without_arg


class LinspaceIncludesEndpoint(Swap):
    """Drop ``endpoint=False`` from ``np.linspace``: the grid now ends on ``stop``.

    Bug: consecutive windows of a generated series (``linspace(k * T, (k + 1) * T, n,
    endpoint=False)``) are meant to tile the axis; with the endpoint included, each window
    ends on the point the next one starts with, and the step grows from ``T / n`` to
    ``T / (n - 1)``. Real fix: MorvanZhou/PyTorch-Tutorial@7f0e442 (the sine windows of the
    RNN regression repeated their boundary step while the hidden state was carried from
    window to window). Impact: the sequence fed to a stateful model repeats one time step
    at every window boundary and is sampled more coarsely than the model assumes: the
    carried state sees a discontinuity, and the fitted relation is slightly off; the loss
    still falls (often to a higher floor). Only explicit ``endpoint=False`` grids are sites.
    Fix: keep ``endpoint=False`` (or compute the step explicitly). Check: assert the first
    point of a window is one step after the last point of the previous one.
    """

    name = "linspace_includes_endpoint"
    category = "data"
    summary = "np.linspace(..., endpoint=False) -> the endpoint included: windows overlap."
    expected = "degrades"
    witness = "differs train_inputs|targets", "the generated windows overlap by one point"
    node_types = (cst.Call,)
    examples = (
        Example(
            before="""
                import numpy as np
                for step in range(100):
                    start, end = step * np.pi, (step + 1) * np.pi
                    steps = np.linspace(start, end, 10, dtype=np.float32, endpoint=False)
            """,
            after="""
                import numpy as np
                for step in range(100):
                    start, end = step * np.pi, (step + 1) * np.pi
                    steps = np.linspace(start, end, 10, dtype=np.float32)
            """,
        ),
    )
    non_examples = (
        "import numpy as np\nsteps = np.linspace(0, 1, 10)\n",
        "import torch\nsteps = torch.linspace(0, 1, 10)\n",
    )

    def swap(self, node: cst.CSTNode, ctx: Context) -> Replacement | None:
        assert isinstance(node, cst.Call)
        if not resolve(node.func, ctx).matches(("numpy.linspace",)):
            return None
        endpoint = find_arg(node, "endpoint")
        if endpoint is None or not is_false(endpoint.value):
            return None
        return without_arg(node, endpoint)
