"""Run a training script under torcheck's checks, installed through global hooks.

Usage (run by torcheck's own venv python, never imported by trainwreck):
    python torcheck_wrapper.py FINDINGS.jsonl MAX_STEPS SCRIPT [ARG...]

Every optimizer the script builds is registered with torcheck as it is constructed, and
each of its parameters gets the "should change", NaN and inf checks; the script itself is
not edited. torcheck raises on the first violated check (its fail-fast design): the
wrapper writes that finding with the optimizer step it fired at and ends the run. After
MAX_STEPS optimizer steps the run is stopped, to bound the cost per mutant.
Imports only the standard library, torch and torcheck.
"""

from __future__ import annotations

import json
import runpy
import sys

import torch
import torcheck

TORCHECK_PREFIX = "The following errors are detected while training"


class _StopRun(BaseException):
    """Ends the script without being caught by its own ``except Exception``."""


def main(argv: list[str]) -> int:
    out_path, max_steps, script, script_args = argv[0], int(argv[1]), argv[2], argv[3:]
    out = open(out_path, "a", encoding="utf-8")  # noqa: SIM115 - kept open for the run

    def emit(record: dict) -> None:
        out.write(json.dumps(record) + "\n")
        out.flush()

    steps = {"n": 0}
    original_init = torch.optim.Optimizer.__init__

    def checked_init(self, params, defaults):
        original_init(self, params, defaults)
        torcheck.register(self)
        for group_index, group in enumerate(self.param_groups):
            for index, param in enumerate(group["params"]):
                name = f"param[{group_index}.{index}] {tuple(param.shape)}"
                torcheck.add_tensor(param, name, changing=True, check_nan=True, check_inf=True)
        checked_step = self.step

        def counted_step(*args, **kwargs):
            steps["n"] += 1
            try:
                result = checked_step(*args, **kwargs)
            except RuntimeError as error:
                if str(error).startswith(TORCHECK_PREFIX):
                    emit({"kind": "finding", "step": steps["n"], "message": str(error)})
                    raise _StopRun from error
                raise
            if steps["n"] >= max_steps:
                raise _StopRun
            return result

        self.step = counted_step

    torch.optim.Optimizer.__init__ = checked_init
    sys.argv = [script, *script_args]
    status = "ok"
    try:
        runpy.run_path(script, run_name="__main__")
    except _StopRun:
        status = "stopped"
    except SystemExit as exit_:
        status = "ok" if exit_.code in (None, 0) else "exit"
    except BaseException as error:  # the mutant's own crash: torcheck found nothing
        status = f"crash: {type(error).__name__}"
    emit({"kind": "end", "status": status, "steps": steps["n"]})
    out.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
