"""What one run is (``RunSpec``) and the cache key that names its folder."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from functools import cache
from importlib import metadata
from pathlib import Path
from typing import Any

# Bump when a change in the harness changes what a trace or result holds: old results
# then no longer match any key and are rerun instead of silently mixed in.
# 12: the loaders' order (``shuffled_loaders``, probe_loaders.py);
# 11: both 10s below, merged;
# 10: witness facts of parameters no module holds, hand-written updates and tied units
#     (``manual_updates``, ``manual_lr``, ``tied_units``; probe_params.py), and a retained
#     graph seen alive without a module forward (probe_graphs.py);
# 10 (beside it): mechanism facts of the real-fault operators (stale forwards, networks in order,
#     gradients at the first step, clamps, cross-entropy on probabilities, reported numbers);
# 9: witness probes (end record and result ``witness``: the facts experiments.witness compares);
# 8: reach probes count hits while evaluating (end record ``reach_eval``, ``reach_eval_hits``);
# 7: the end record's ``raised`` (exception, frames in the mutated file), ``stillborn``;
# 6: numbers the script logs or prints are captured (metric, capture, report records);
# 5: sealed rows with their budget, output and trace caps, descendants end with a run;
# 4: runs start in a private mirror of the invocation folder, reach probes, module mutants;
# 3: loss_fn records thinned, RSS sampled; 2: exception before training = crash
HARNESS_VERSION = "12"


@cache
def torch_version() -> str:
    """The installed torch version, read without importing torch (keys stay cheap)."""
    try:
        return metadata.version("torch")
    except metadata.PackageNotFoundError:
        import torch

        return str(torch.__version__)


def source_sha(source: str) -> str:
    return hashlib.sha256(source.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class Splice:
    """A mutant's source held as its file's text and the edits that make it.

    The text is one string shared by every mutant of the file, so a sweep over a long
    script holds it once plus a few hundred bytes per mutant instead of every mutant's
    full source. ``sha256`` is the rendered source's digest, computed once at planning
    (the cache key needs it; a cached run never renders). Two splices are equal when
    their sources are, as two ``str`` sources would be.
    """

    base: str = field(compare=False, repr=False)
    edits: tuple[tuple[int, int, str], ...] = field(compare=False, repr=False)
    sha256: str = ""

    def render(self) -> str:
        pieces, cursor = [], 0
        for start, end, text in self.edits:
            pieces += (self.base[cursor:start], text)
            cursor = end
        pieces.append(self.base[cursor:])
        return "".join(pieces)


@dataclass(frozen=True)
class RunSpec:
    """One run: a source (the script itself or a mutant of it), argv, seed and device.

    ``script`` is the original file: the run executes ``source`` as if it were that file
    (``__file__``, ``sys.path[0]``, tracebacks), so a mutant behaves like the script.
    ``mutant`` holds the mutant's identity and diff (None for the unmutated script).
    ``invalid_reason`` marks a run that cannot start (e.g. the engine could not build the
    mutant): it becomes an ``invalid`` result without a process.

    ``cwd`` is the folder the script is run from (a private mirror of it, see
    ``workdir``; None: the folder the harness was started from). ``target`` is the file the
    mutant changes when it is not the script (a module the script imports); ``source`` is
    then that module's mutated text and the script runs as it is. ``source`` may be a
    ``Splice`` (what a sweep plans): ``text()`` renders it when the run starts. ``context`` holds what
    else decides the outcome (the project's files' digests, the folder): it joins the key.
    """

    script: str
    source: str | Splice
    argv: tuple[str, ...] = ()
    seed: int = 0
    device: str = "cpu"
    loop: str = ""
    mutant: dict[str, Any] | None = field(default=None, compare=False)
    timeout_s: float | None = None  # None: derived from the reference run of the group
    mem_cap_mb: int = 2048  # above the child's memory at start
    threads: int = 1
    sample_every: int = 20  # gradient norm / update ratio on step 1 and every k-th after
    telemetry: bool = True  # False: no hooks (start/end/report records only), e.g. to time
    invalid_reason: str | None = None
    cwd: str | None = None
    target: str | None = None
    context: tuple[str, ...] = ()
    holdout: str | None = None  # "module:function" run on the trained model after the script
    metrics: str | None = None  # loop.metrics: a regex naming val_loss / val_metric in lines

    @property
    def identity(self) -> str:
        return self.mutant["identity"] if self.mutant else "none"

    @property
    def loop_name(self) -> str:
        return self.loop or Path(self.script).stem

    @property
    def run_id(self) -> str:
        return f"{self.loop_name}/{self.identity}/seed{self.seed}/{self.device}"

    @property
    def group(self) -> tuple[str, str, str]:
        """Runs that share a reference run (and so a deadline): same loop, script, device."""
        return (self.loop_name, self.script, self.device)

    @property
    def sha256(self) -> str:
        if isinstance(self.source, Splice):
            return self.source.sha256
        return source_sha(self.source)

    def text(self) -> str:
        """The source the run executes (a ``Splice`` is rendered here, not kept)."""
        return self.source.render() if isinstance(self.source, Splice) else self.source

    @property
    def key(self) -> str:
        return cache_key(
            self.sha256,
            self.argv,
            self.seed,
            self.device,
            self.telemetry,
            self.context,
            self.holdout,
            self.metrics,
        )


def cache_key(
    sha: str,
    argv: tuple[str, ...] | list[str],
    seed: int,
    device: str,
    telemetry: bool = True,
    context: tuple[str, ...] = (),
    holdout: str | None = None,
    metrics: str | None = None,
) -> str:
    """sha256 over what decides a run's outcome: the code that runs, its arguments, the
    seed, the device, the torch and harness versions. Paths and deadlines are left out on
    purpose: moving a checkout or changing a budget must not invalidate results."""
    fields: dict[str, Any] = {
        "sha256": sha,
        "argv": list(argv),
        "seed": int(seed),
        "device": device,
        "torch": torch_version(),
        "harness": HARNESS_VERSION,
    }
    if not telemetry:  # a run without hooks has no curves: never a stand-in for one with
        fields["telemetry"] = False
    if context:  # a user's project: its other files and data folder decide the outcome too
        fields["context"] = list(context)
    if holdout:  # a run with a held-out evaluation holds more than one without
        fields["holdout"] = holdout
    if metrics:  # a pattern decides which printed numbers become reported ones
        fields["metrics"] = metrics
    payload = json.dumps(fields, sort_keys=True)
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()
