"""Reproducibility rules: a script that seeds some random generators but not torch's."""

from __future__ import annotations

import libcst as cst

from experiments.bench.lint.rule import LintRule, Report
from experiments.bench.lint.script import Script
from mutator.semantics import callee_name, imports, method_name

# Global seeding of the generators a training script may use besides torch's.
_OTHER_GLOBAL_SEEDS = frozenset({"random.seed", "numpy.random.seed"})
# Calls that take a seed but seed neither torch's global generator nor an unknown one.
_KNOWN_LOCAL_SEEDING = frozenset(
    {
        "numpy.random.default_rng",
        "numpy.random.RandomState",
        "numpy.random.Generator",
        "random.Random",
        "torch.Generator",
    }
)
# Calls that only print, log or declare a seed (``parser.add_argument("--seed")``).
_REPORTING = frozenset(
    {"add_argument", "print", "info", "debug", "warning", "log", "write", "format", "dict", "str"}
)
# Libraries whose functions we know do not seed torch (a split's ``random_state=seed``).
_NON_TORCH_LIBRARIES = ("numpy.", "random.", "sklearn.", "pandas.", "scipy.")


class SeedsOthersButNotTorch(LintRule):
    """``random.seed(args.seed)`` / ``np.random.seed(args.seed)`` but no ``torch.manual_seed``:
    the script means to be reproducible, yet weight init, dropout and shuffling differ on
    every run and ``--seed`` is ignored for them.

    Only a seed that comes from a seed setting (``args.seed``, ``SEED``, ``cfg.seed``) counts
    as that intent: ``np.random.seed(0)`` before a fixed split may deliberately leave
    training random. Silent as soon as anything else might seed torch: any call whose name
    mentions a seed (``seed_everything``, ``set_seed``, ``torch.initial_seed``), or a seed
    handed to a function that is neither in this file nor in a library known not to seed
    torch (``utils.setup(args.seed)`` in another file may call ``torch.manual_seed``)."""

    code = "TW608"
    category = "numerics"
    summary = "torch not seeded"
    operators = ("drop_manual_seed",)
    confidence = "medium"
    invalid = (
        """
        import random
        import numpy as np
        import torch
        random.seed(args.seed)  # <-
        np.random.seed(args.seed)
        g = torch.Generator().manual_seed(args.seed)
        model = Net()
        """,
        """
        import numpy
        import torch
        from sklearn.model_selection import train_test_split
        SEED = 1
        numpy.random.seed(SEED)  # <-
        X_tr, X_va = train_test_split(X, random_state=SEED)
        """,
    )
    valid = (
        """
        import random
        import numpy as np
        import torch
        random.seed(args.seed)
        np.random.seed(args.seed)
        torch.manual_seed(args.seed)
        """,
        """
        import numpy as np
        import torch
        from lightning import seed_everything
        np.random.seed(cfg.seed)
        seed_everything(cfg.seed)
        """,
        """
        import numpy as np
        import torch
        from utils import setup_run
        np.random.seed(args.seed)
        setup_run(args.seed)
        """,
        """
        import numpy as np
        import torch
        np.random.seed(0)  # a fixed split; training is meant to vary
        perm = np.random.permutation(len(X))
        """,
        """
        import numpy as np
        import torch
        def worker_init_fn(worker_id):
            np.random.seed(torch.initial_seed() % 2**32)
        """,
        """
        import random
        import numpy as np
        import torch
        def set_seed(seed):
            random.seed(seed)
            np.random.seed(seed)
            torch.cuda.manual_seed_all(seed)
        """,
        """
        import random
        random.seed(args.seed)
        """,
    )

    def check(self, script: Script) -> Report:
        if not any(b.qualified.startswith("torch") for b in imports(script.ctx).all_bindings):
            return  # no torch generator to seed
        seeding: list[cst.Call] = []
        for call in script.calls:
            names = script.qualified(call.func)
            if names & _OTHER_GLOBAL_SEEDS:
                if call.args and "seed" in script.ctx.code(call.args[0].value).lower():
                    seeding.append(call)
            elif self._may_seed_torch(script, call, names):
                return
        if seeding:
            yield (
                seeding[0],
                "random/numpy are seeded but torch is not: weight init, dropout and shuffling"
                " differ on every run (add torch.manual_seed)",
            )

    @staticmethod
    def _may_seed_torch(script: Script, call: cst.Call, names: set[str]) -> bool:
        if names & _KNOWN_LOCAL_SEEDING:
            return False
        if _seeds_a_generator(script, call):
            return False
        if "seed" in (callee_name(call) or "").lower():
            return True  # torch.manual_seed, seed_everything, set_seed, torch.initial_seed
        if any(name.startswith(_NON_TORCH_LIBRARIES) for name in names):
            return False
        if script.functions.get(callee_name(call) or "") or callee_name(call) in _REPORTING:
            return False  # defined here (its body is searched like the rest), or a print
        return any(
            "seed" in script.ctx.code(arg.value).lower()
            for arg in call.args
            if not isinstance(arg.value, (cst.SimpleString, cst.ConcatenatedString))
        )


def _seeds_a_generator(script: Script, call: cst.Call) -> bool:
    """``torch.Generator().manual_seed(s)`` or ``g.manual_seed(s)`` with ``g = torch.Generator()``:
    a generator for one loader or split, not torch's global one."""
    if method_name(call) != "manual_seed" or not isinstance(call.func, cst.Attribute):
        return False
    receiver = script.value_of(call.func.value, call)
    return isinstance(receiver, cst.Call) and "torch.Generator" in script.qualified(receiver.func)
