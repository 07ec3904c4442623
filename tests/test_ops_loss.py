"""Loss and numerics operators: what their embedded examples cannot express.

Name resolution across import styles (the engine's import-based qualified names, plus
star imports and the script's own look-alike classes), criterion values followed through
parameters and ``self``, multi-site edits, parameters and variants, and the behaviour each
docstring claims, checked by running the mutated code on tiny tensors.
"""

from __future__ import annotations

import warnings

import pytest
import torch
from conftest import mutate, run_script, sites

from mutations.registry import all_variants, get_operator, resolve
from mutator import SourceFile

MY_CATEGORIES = ("loss", "numerics")


def run(source: str) -> dict:
    return run_script(source, name="snippet")


# -- name resolution ---------------------------------------------------------------------

CROSS_ENTROPY_SPELLINGS = {
    "import-as": ("import torch.nn as nn\n", "nn.CrossEntropyLoss()"),
    "torch-dotted": ("import torch\n", "torch.nn.CrossEntropyLoss()"),
    "from-torch": ("from torch import nn\n", "nn.CrossEntropyLoss()"),
    "from-torch-nn": ("from torch.nn import CrossEntropyLoss\n", "CrossEntropyLoss()"),
    "alias": ("from torch.nn import CrossEntropyLoss as CE\n", "CE()"),
    "star": ("from torch.nn import *\n", "CrossEntropyLoss()"),
}


@pytest.mark.parametrize("spelling", CROSS_ENTROPY_SPELLINGS, ids=list(CROSS_ENTROPY_SPELLINGS))
def test_cross_entropy_criterion_is_recognised_in_every_import_style(spelling):
    imports, constructor = CROSS_ENTROPY_SPELLINGS[spelling]
    source = f"{imports}criterion = {constructor}\nloss = criterion(logits, y)\n"
    assert mutate(source, "softmax_before_cross_entropy").endswith(
        "loss = criterion(logits.softmax(dim=1), y)\n"
    )
    assert [site.operator.name for site in sites(source, "reduction_sum")] == ["reduction_sum"]


FUNCTIONAL_SPELLINGS = {
    "F": ("import torch.nn.functional as F\n", "F.cross_entropy"),
    "from-nn-import-functional": ("from torch.nn import functional as F\n", "F.cross_entropy"),
    "torch-dotted": ("import torch\n", "torch.nn.functional.cross_entropy"),
    "bare": ("from torch.nn.functional import cross_entropy\n", "cross_entropy"),
}


@pytest.mark.parametrize("spelling", FUNCTIONAL_SPELLINGS, ids=list(FUNCTIONAL_SPELLINGS))
def test_functional_cross_entropy_is_recognised_in_every_import_style(spelling):
    imports, function = FUNCTIONAL_SPELLINGS[spelling]
    source = f"{imports}loss = {function}(logits, y)\n"
    assert mutate(source, "swap_loss_arguments").endswith(f"loss = {function}(y, logits)\n")


def test_bare_function_swap_imports_the_new_name():
    source = "from torch.nn.functional import cross_entropy\nloss = cross_entropy(z, y)\n"
    mutant = mutate(source, "mse_for_classification", variant="plain")
    assert mutant == (
        "from torch.nn.functional import cross_entropy, mse_loss\nloss = mse_loss(z, y)\n"
    )


def test_multiline_import_grows_one_name_per_line():
    source = (
        "from torch.nn import (\n    BCEWithLogitsLoss,\n    Linear,\n)\n"
        "criterion = BCEWithLogitsLoss()\n"
    )
    assert mutate(source, "bce_on_logits") == (
        "from torch.nn import (\n    BCEWithLogitsLoss,\n    Linear,\n    BCELoss,\n)\n"
        "criterion = BCELoss()\n"
    )


LOOK_ALIKES = {
    "own-module": "from mylosses import CrossEntropyLoss\ncriterion = CrossEntropyLoss()\n",
    "own-class": "class CrossEntropyLoss:\n    pass\ncriterion = CrossEntropyLoss()\n",
    "other-library": "import mylib\ncriterion = mylib.nn.CrossEntropyLoss()\n",
}


@pytest.mark.parametrize("source", LOOK_ALIKES.values(), ids=list(LOOK_ALIKES))
def test_losses_that_are_not_torch_are_left_alone(source):
    source += "loss = criterion(logits, y)\n"
    operators = [op for op in all_variants() if op.category in MY_CATEGORIES]
    assert SourceFile(source, "t.py").find_sites(operators) == []


# -- criterion values followed through names, self and parameters ---------------------------


def test_criterion_passed_into_a_trainer_class_is_followed():
    source = (
        "import torch\nfrom torch import nn\n"
        "class Trainer:\n"
        "    def __init__(self, model, criterion):\n"
        "        self.model = model\n        self.criterion = criterion\n"
        "    def step(self, x, y):\n"
        "        return self.criterion(self.model(x).squeeze(1), y)\n"
        "trainer = Trainer(model, nn.BCEWithLogitsLoss())\n"
    )
    mutant = mutate(source, "sigmoid_before_bce_with_logits")
    assert "return self.criterion(torch.sigmoid(self.model(x).squeeze(1)), y)" in mutant
    assert "return self.criterion(self.model(x), y)" in mutate(source, "target_shape_broadcast")


def test_criterion_passed_to_a_function_under_another_name_is_followed():
    source = (
        "from torch import nn\n"
        "def train(model, batches, loss_fn):\n"
        "    for x, y in batches:\n        loss = loss_fn(model(x), y)\n"
        "def main():\n"
        "    train(model, batches, loss_fn=nn.NLLLoss())\n"
    )
    assert "loss = loss_fn(y, model(x))" in mutate(source, "swap_loss_arguments")


def test_each_function_sees_its_own_criterion():
    source = (
        "from torch import nn\n"
        "def classify(logits, y):\n"
        "    criterion = nn.CrossEntropyLoss()\n    return criterion(logits, y)\n"
        "def regress(pred, y):\n"
        "    criterion = nn.MSELoss()\n    return criterion(pred, y)\n"
    )
    found = sites(source, "softmax_before_cross_entropy")
    assert [site.scope for site in found] == ["classify"]
    # MSE is symmetric, so only the cross-entropy call gets its arguments swapped
    assert [site.scope for site in sites(source, "swap_loss_arguments")] == ["classify"]


# -- mse_for_classification: one site, several edits ------------------------------------------

TWO_USES = (
    "import torch\nimport torch.nn.functional as F\nfrom torch import nn\n"
    "def train_step(model, x, y, criterion):\n"
    "    logits = model(x)\n    return criterion(logits, y)\n"
    "def evaluate(model, x, y, criterion):\n"
    "    with torch.no_grad():\n        return criterion(model(x), y).item()\n"
    "criterion = nn.CrossEntropyLoss()\n"
    "torch.manual_seed(0)\n"
    "model = nn.Linear(4, 3)\n"
    "x, y = torch.randn(8, 4), torch.randint(0, 3, (8,))\n"
    "train_loss = train_step(model, x, y, criterion)\n"
    "val_loss = evaluate(model, x, y, criterion)\n"
)


def test_onehot_mse_rewrites_the_constructor_and_every_call_in_one_mutant():
    mutant = mutate(TWO_USES, "mse_for_classification")
    assert "criterion = nn.MSELoss()" in mutant
    assert "    return criterion(logits, F.one_hot(y, logits.size(-1)).float())\n" in mutant
    # evaluate called the model inline: its output is bound first, under a free name
    assert (
        "        logits = model(x)\n"
        "        return criterion(logits, F.one_hot(y, logits.size(-1)).float()).item()\n"
    ) in mutant
    namespace = run(mutant)
    model, x, y = namespace["model"], namespace["x"], namespace["y"]
    expected = torch.nn.functional.mse_loss(model(x), torch.nn.functional.one_hot(y, 3).float())
    assert namespace["train_loss"].item() == pytest.approx(expected.item())
    assert namespace["val_loss"] == pytest.approx(expected.item())


def test_plain_mse_swaps_only_the_constructor_and_crashes_on_class_indices():
    mutant = mutate(TWO_USES, "mse_for_classification", variant="plain")
    assert mutant.count("criterion(logits, y)") == 1 and "nn.MSELoss()" in mutant
    with warnings.catch_warnings(), pytest.raises(RuntimeError, match="size of tensor"):
        warnings.simplefilter("ignore")  # MSE warns about the broadcast before it fails
        run(mutant)


def test_onehot_mse_does_not_apply_when_a_use_cannot_be_converted():
    source = (
        "import torch.nn.functional as F\nfrom torch import nn\ncriterion = nn.CrossEntropyLoss()\n"
        "losses = [criterion(model(x), y) for x, y in batches]\n"
    )
    assert sites(source, "mse_for_classification") == []
    assert len(sites(source, "mse_for_classification", variant="plain")) == 1


def test_hoisted_input_name_avoids_names_in_use():
    source = (
        "import torch.nn.functional as F\n"
        "def step(model, x, y, logits):\n    return F.cross_entropy(model(x), y)\n"
    )
    assert (
        "    outputs = model(x)\n    return F.mse_loss(outputs, F.one_hot(y, outputs.size(-1))"
        in (mutate(source, "mse_for_classification"))
    )


# -- behaviour the docstrings claim, on tiny tensors ---------------------------------------------

LOGITS = (
    "import torch\nimport torch.nn.functional as F\nfrom torch import nn\n"
    "logits = torch.tensor([[4.0, -2.0, 0.5], [0.0, 3.0, -1.0]], requires_grad=True)\n"
    "y = torch.tensor([0, 1])\n"
)


def test_bce_on_logits_crashes_on_logits_outside_unit_interval():
    source = (
        "import torch\nfrom torch import nn\ncriterion = nn.BCEWithLogitsLoss()\n"
        "loss = criterion(torch.tensor([3.0, -2.0]), torch.tensor([1.0, 0.0]))\n"
    )
    run(source)
    with pytest.raises(RuntimeError, match="between 0 and 1"):
        run(mutate(source, "bce_on_logits"))


def test_float_class_targets_crash_cross_entropy():
    source = LOGITS.replace(
        "y = torch.tensor([0, 1])", "y = torch.tensor([0, 1], dtype=torch.long)"
    )
    source += "loss = nn.CrossEntropyLoss()(logits, y)\n"
    run(source)
    mutant = mutate(source, "float_class_targets")
    assert "dtype=torch.float32" in mutant
    with pytest.raises(RuntimeError):
        run(mutant)


def test_nll_on_raw_logits_goes_negative():
    source = LOGITS + "loss = F.nll_loss(F.log_softmax(logits, dim=1), y)\n"
    assert run(source)["loss"].item() > 0
    assert run(mutate(source, "nll_without_log_softmax"))["loss"].item() == pytest.approx(-3.5)


def test_naive_log_softmax_turns_confident_predictions_into_inf():
    source = (
        "import torch\nimport torch.nn.functional as F\n"
        "logits = torch.tensor([[200.0, 0.0]])\n"
        "loss = F.nll_loss(F.log_softmax(logits, dim=1), torch.tensor([1]))\n"
    )
    assert run(source)["loss"].item() == pytest.approx(200.0)
    assert run(mutate(source, "naive_log_softmax"))["loss"].item() == float("inf")


def test_softmax_before_cross_entropy_puts_a_floor_under_the_loss():
    source = (
        "import torch\nfrom torch import nn\ncriterion = nn.CrossEntropyLoss()\n"
        "perfect = torch.eye(10) * 50\nloss = criterion(perfect, torch.arange(10))\n"
    )
    assert run(source)["loss"].item() < 1e-6
    # log(1 + 9/e) for a one-hot probability vector over 10 classes
    assert run(mutate(source, "softmax_before_cross_entropy"))["loss"].item() == pytest.approx(
        1.4612, abs=1e-3
    )


def test_double_sigmoid_cannot_reach_a_small_loss():
    source = (
        "import torch\nfrom torch import nn\ncriterion = nn.BCEWithLogitsLoss()\n"
        "loss = criterion(torch.tensor([30.0]), torch.tensor([1.0]))\n"
    )
    assert run(mutate(source, "sigmoid_before_bce_with_logits"))["loss"].item() > 0.31


def test_target_shape_broadcast_warns_and_averages_every_pair():
    source = (
        "import torch\nfrom torch import nn\ncriterion = nn.MSELoss()\n"
        "pred = torch.tensor([[1.0], [2.0]])\ny = torch.tensor([1.0, 2.0])\n"
        "loss = criterion(pred, y.unsqueeze(1))\n"
    )
    assert run(source)["loss"].item() == 0.0
    mutant = mutate(source, "target_shape_broadcast")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert run(mutant)["loss"].item() == pytest.approx(0.5)
    assert any("broadcasting" in str(warning.message) for warning in caught)


def test_swapped_cross_entropy_arguments_crash():
    source = LOGITS + "loss = F.cross_entropy(logits, y)\n"
    with pytest.raises((RuntimeError, NotImplementedError)):
        run(mutate(source, "swap_loss_arguments"))


def test_reduction_sum_scales_the_loss_with_the_batch():
    source = LOGITS + "loss = F.cross_entropy(logits, y)\n"
    mean, total = run(source)["loss"], run(mutate(source, "reduction_sum"))["loss"]
    assert total.item() == pytest.approx(2 * mean.item())


def test_ignored_class_contributes_nothing():
    source = LOGITS + "loss = F.cross_entropy(logits[:1], y[:1])\n"
    assert torch.isnan(run(mutate(source, "ignore_index_wrong"))["loss"])
    three = mutate(LOGITS + "loss = F.cross_entropy(logits, y)\n", "ignore_index_wrong", index=3)
    assert "ignore_index=3" in three


def test_accumulated_loss_keeps_the_graph():
    source = LOGITS + (
        "total = 0.0\nfor _ in range(2):\n"
        "    loss = F.cross_entropy(logits, y)\n    loss.backward()\n    total += loss.item()\n"
    )
    assert isinstance(run(source)["total"], float)
    assert run(mutate(source, "accumulate_loss_graph"))["total"].grad_fn is not None


def test_low_precision_loss_is_computed_in_the_chosen_dtype():
    source = LOGITS + "loss = F.cross_entropy(logits, y)\n"
    assert run(mutate(source, "low_precision_loss"))["loss"].dtype == torch.bfloat16
    assert run(mutate(source, "low_precision_loss", dtype="float16"))["loss"].dtype == torch.float16


MODEL = (
    "import torch\nfrom torch import nn\ntorch.manual_seed(0)\n"
    "model = nn.Sequential(\n    nn.Linear(4, 8),\n    nn.ReLU(),\n    nn.Dropout(0.1),\n"
    "    nn.Linear(8, 2),\n)\n"
    "optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)\n"
)


def test_zero_init_zeroes_every_parameter_before_the_optimizer():
    namespace = run(mutate(MODEL, "zero_init"))
    assert all(not param.any() for param in namespace["model"].parameters())


def test_drop_activation_leaves_a_linear_network_and_keeps_the_layout():
    mutant = mutate(MODEL, "drop_activation")
    assert "    nn.Linear(4, 8),\n    nn.Dropout(0.1),\n" in mutant
    model = run(mutant)["model"].eval()
    x = torch.randn(3, 4)
    bias = model(torch.zeros(1, 4))
    # affine: f(2x) - f(0) == 2 (f(x) - f(0))
    assert torch.allclose(model(2 * x) - bias, 2 * (model(x) - bias), atol=1e-5)


def test_dropout_and_adam_eps_take_their_parameters():
    assert run(mutate(MODEL, "dropout_too_high"))["model"][2].p == 0.9
    assert run(mutate(MODEL, "dropout_too_high", p=0.75))["model"][2].p == 0.75
    assert sites(MODEL, "dropout_too_high", p=0.05) == []  # 0.1 is already higher
    optimizer = run(mutate(MODEL, "adam_eps_too_small"))["optimizer"]
    assert optimizer.defaults["eps"] == 1e-16
    assert "eps=1e-10" in mutate(MODEL, "adam_eps_too_small", eps=1e-10)


def test_missing_epsilon_turns_a_constant_feature_into_nan():
    source = (
        "import torch\nX = torch.tensor([[1.0, 5.0], [2.0, 5.0], [3.0, 5.0]])\n"
        "mean, std = X.mean(0), X.std(0) + 1e-8\nX = (X - mean) / std\n"
    )
    assert not torch.isnan(run(source)["X"]).any()
    assert torch.isnan(run(mutate(source, "missing_epsilon"))["X"]).any()


# -- parameters and variants -------------------------------------------------------------------


def test_variants_and_parameter_specs():
    labels = {op.label for op in all_variants() if op.category in MY_CATEGORIES}
    assert {"mse_for_classification(variant=plain)", "low_precision_loss(dtype=float16)"} <= labels
    assert resolve("ignore_index_wrong(index=3)").params == {"index": 3}
    with pytest.raises(ValueError, match="not one of"):
        get_operator("mse_for_classification", variant="squared")
    with pytest.raises(ValueError, match="not one of"):
        get_operator("low_precision_loss", dtype="float8")
