"""Small, exact fingerprints of what a run computed, for the witness probes (probes.py).

``digest(tensor)``: a CRC-32 of the tensor's dtype, shape and up to ``DIGEST_ELEMENTS``
evenly strided elements (every element of a small tensor), as 8 hex digits. Two runs on
one seed compute the same bytes, so equal digests mean equal tensors there (up to the
stride on large ones) and a changed label, pixel order or normalisation changes it. On
an accelerator the strided copy stays a tensor until ``resolve`` reads it (no host sync
in the hook). ``Sampled``: a sequence of such values kept at the first ``HEAD`` positions
and every ``EVERY``-th after, at most ``CAP`` of them, with the number of events seen and
a checksum over all of them.
"""

from __future__ import annotations

import zlib
from typing import Any

import torch

DIGEST_ELEMENTS = 4096
HEAD = 8
EVERY = 20
CAP = 48
_Tensor = torch.Tensor
_tracing = torch._C._is_tracing


def digest(tensor: Any) -> str | _Held | None:
    """The fingerprint of ``tensor`` (module docstring), or None for what has none. None
    while ``torch.jit.trace`` records: its ops would go into the traced graph (and the
    tracer rejects ``view(dtype)``: ``torch.jit.trace`` of a model failed under the probes)."""
    if not isinstance(tensor, _Tensor) or tensor.is_sparse or tensor.is_nested or _tracing():
        return None
    flat = tensor.detach().reshape(-1)
    count = flat.numel()
    if count > DIGEST_ELEMENTS:
        flat = flat[:: count // DIGEST_ELEMENTS + 1]
    flat = flat.contiguous()
    if not flat.is_cpu:
        return _Held(flat, tensor.dtype, tuple(tensor.shape))
    return _crc(flat, tensor.dtype, tuple(tensor.shape))


class _Held:
    """An accelerator tensor's strided copy, read when the facts are written."""

    __slots__ = ("dtype", "flat", "shape")

    def __init__(self, flat: torch.Tensor, dtype: torch.dtype, shape: tuple[int, ...]):
        self.flat, self.dtype, self.shape = flat, dtype, shape


_HEADS: dict[tuple[torch.dtype, tuple[int, ...]], int] = {}


def _crc(flat: torch.Tensor, dtype: torch.dtype, shape: tuple[int, ...]) -> str:
    head = _HEADS.get((dtype, shape))
    if head is None:
        if len(_HEADS) > 256:
            _HEADS.clear()
        head = _HEADS[(dtype, shape)] = zlib.crc32(f"{dtype}{list(shape)}".encode())
    if flat.numel():  # the array's buffer, read in place
        head = zlib.crc32(flat.view(torch.uint8).numpy(), head)
    return f"{head:08x}"


def resolve(value: Any) -> Any:
    """A value as JSON holds it: a held accelerator digest read, a scalar tensor a float."""
    if isinstance(value, _Held):
        return _crc(value.flat.cpu(), value.dtype, value.shape)
    if isinstance(value, _Tensor):
        return float(value.detach().cpu().reshape(()).item()) if value.numel() == 1 else None
    return value


class Sampled:
    """A sampled sequence (module docstring): ``want()`` says whether the next event is
    kept, ``add`` records it (and counts it either way). ``chain`` folds every value
    added (a CRC-32 over their texts): two runs that end normally with the same events
    have the same chain, so a difference at an event no sample kept (the one evaluation
    of a test set at the end) still shows. An accelerator's values are read only when
    sampled, so there the chain stops (None)."""

    __slots__ = ("at", "chain", "n")

    def __init__(self) -> None:
        self.n = 0
        self.at: list[list[Any]] = []
        self.chain: int | None = 0

    def want(self) -> bool:
        n = self.n
        return (n < HEAD or n % EVERY == 0) and len(self.at) < CAP

    def add(self, value: Any, kept: bool | None = None) -> None:
        if self.want() if kept is None else kept:
            self.at.append([self.n, value])
        self.n += 1
        chain = self.chain
        if chain is not None:
            if value.__class__ is str:
                self.chain = zlib.crc32(value.encode(), chain)
            elif value.__class__ is float:
                self.chain = zlib.crc32(float.__repr__(value).encode(), chain)
            elif value is not None:
                self.chain = None

    def record(self) -> dict[str, Any]:
        kept = list(self.at)
        for entry in kept:  # read once: later records reuse the value
            entry[1] = resolve(entry[1])
        chain = None if self.chain is None else f"{self.chain:08x}"
        return {"n": self.n, "chain": chain, "at": [list(entry) for entry in kept]}
