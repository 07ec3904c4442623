"""Mode, device and optim operators: import spellings, loop styles, parameters, and what
each mutant actually does when it runs (executed on CPU, device bugs on the meta device)."""

from __future__ import annotations

import pytest
from conftest import mutate, run_script, sites

from mutations.registry import all_variants, get_operator, resolve
from mutator import SourceFile

MODE = ("drop_train_mode", "eval_mode_before_training", "drop_eval_mode", "drop_no_grad")
DEVICE = ("drop_input_to_device", "drop_target_to_device", "drop_model_to_device")


# -- import spellings -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("imports", "callee"),
    [
        ("import torch", "torch.optim.Adam"),
        ("import torch.optim as optim", "optim.Adam"),
        ("from torch import optim", "optim.Adam"),
        ("from torch.optim import Adam", "Adam"),
        ("from torch.optim import Adam as A", "A"),
        ("from torch.optim.adam import Adam", "Adam"),
    ],
)
def test_optimizer_recognised_under_every_import_spelling(imports, callee):
    source = f"{imports}\nopt = {callee}(model.parameters(), lr=1e-3)\n"
    assert mutate(source, "scale_lr").endswith(f"opt = {callee}(model.parameters(), lr=0.1)\n")
    assert "SGD(model.parameters(), lr=1e-3)" in mutate(source, "sgd_instead_of_adam")


def test_a_lookalike_optimizer_from_another_library_is_no_site():
    source = "from keras.optimizers import Adam\nopt = Adam(learning_rate=1e-3, lr=1e-3)\n"
    assert sites(source, "scale_lr") == []
    assert sites(source, "sgd_instead_of_adam") == []


def test_swapping_a_from_imported_optimizer_extends_the_import():
    source = "from torch.optim import AdamW as W\nopt = W(params, lr=1e-3)\n"
    mutant = mutate(source, "adam_l2_instead_of_adamw")
    assert mutant == (
        "from torch.optim import Adam, AdamW as W\nopt = Adam(params, lr=1e-3, weight_decay=0.01)\n"
    )


@pytest.mark.parametrize(
    ("imports", "constructor"),
    [
        ("import torch", "torch.optim.lr_scheduler.StepLR"),
        ("from torch.optim.lr_scheduler import StepLR as Decay", "Decay"),
        ("from torch.optim import lr_scheduler", "lr_scheduler.StepLR"),
    ],
)
def test_scheduler_recognised_by_what_it_was_built_from(imports, constructor):
    # The receiver is named nothing like a scheduler; its constructor decides.
    source = f"{imports}\npolicy = {constructor}(opt, 5)\nfor e in range(3):\n    policy.step()\n"
    assert mutate(source, "drop_scheduler_step") == (
        f"{imports}\npolicy = {constructor}(opt, 5)\nfor e in range(3):\n    pass\n"
    )


def test_an_optimizer_named_like_a_scheduler_is_not_one():
    source = "import torch\nsched_opt = torch.optim.SGD(ps, lr=0.1)\nsched_opt.step()\n"
    assert sites(source, "drop_scheduler_step") == []


@pytest.mark.parametrize(
    "opening",
    [
        "import torch\nwith torch.no_grad():",
        "from torch import no_grad\nwith no_grad():",
        "import torch as T\nwith T.inference_mode():",
        "import torch\nwith torch.autograd.no_grad():",
    ],
)
def test_no_grad_recognised_under_every_spelling(opening):
    source = f"{opening}\n    out = model(x)\n"
    assert mutate(source, "drop_no_grad").endswith("\nout = model(x)\n")


def test_no_grad_around_old_style_evaluation_code_is_a_site():
    source = (
        "import torch\n\n@torch.no_grad()\ndef evaluate(model, x):\n"
        "    device = next(model.parameters()).device\n"
        "    return model(x.to(device)).data.max(1)[1]\n"
    )
    assert mutate(source, "drop_no_grad").startswith("import torch\n\ndef evaluate(")
    weights = (
        "import torch\nwith torch.no_grad():\n    layer.weight.data = layer.weight.data * 0.5\n"
    )
    assert sites(weights, "drop_no_grad") == []


@pytest.mark.parametrize(
    "imports", ["from torch import nn", "import torch.nn as nn", "import torch"]
)
def test_a_model_class_is_recognised_through_its_base(imports):
    base = "torch.nn.Module" if imports == "import torch" else "nn.Module"
    # Body reads self.training: the mode matters (without it drop_train_mode is equivalent).
    source = (
        f"{imports}\nclass Body({base}):\n    def forward(self, x):\n"
        "        return x * 0.5 if self.training else x\nclass Head(Body):\n    pass\n"
        "m = Head().to(device)\nfor epoch in range(2):\n    m.train()\n    m.eval()\n"
    )
    assert len(sites(source, "drop_model_to_device")) == 1
    assert len(sites(source, "drop_train_mode")) == 1


def test_a_plain_class_and_a_loss_are_not_models():
    source = (
        "from torch import nn\nclass Runner:\n    pass\n"
        "runner = Runner().to(device)\ncriterion = nn.CrossEntropyLoss(weight=w).to(device)\n"
        "x = nn.functional.relu(x).to(device)\nrunner.train()\nrunner.eval()\n"
    )
    assert sites(source, "drop_model_to_device") == []
    assert sites(source, "drop_train_mode") == []
    assert sites(source, "drop_eval_mode") == []


def test_dataloader_recognised_under_module_alias():
    source = "from torch.utils import data\ntrain_dl = data.DataLoader(ds, batch_size=16)\n"
    assert mutate(source, "change_batch_size").endswith("batch_size=128)\n")


# -- loop styles --------------------------------------------------------------------------------

TRAINER = """\
import torch
from torch import nn, optim


class Trainer:
    def __init__(self, model, train_loader, val_loader, device):
        self.model = model.to(device)
        self.device = device
        self.train_loader, self.val_loader = train_loader, val_loader
        self.optimizer = optim.SGD(self.model.parameters(), lr=0.1, momentum=0.9)
        self.scheduler = optim.lr_scheduler.StepLR(self.optimizer, step_size=10)

    def fit(self, epochs):
        for epoch in range(epochs):
            self.model.train()
            for inputs, labels in self.train_loader:
                inputs, labels = inputs.to(self.device), labels.to(self.device)
                self.optimizer.zero_grad()
                nn.functional.cross_entropy(self.model(inputs), labels).backward()
                self.optimizer.step()
            self.scheduler.step()
            self.validate(self.val_loader)

    @torch.no_grad()
    def validate(self, loader):
        self.model.eval()
        return [self.model(inputs.to(self.device)) for inputs, _ in loader]
"""


def test_trainer_class_spelling_gets_every_applicable_operator():
    source_file = SourceFile(TRAINER, "trainer.py")
    found = source_file.find_sites(all_variants())
    names = {site.operator.name for site in found if site.operator.category != "loss"}
    expected = {
        *MODE,
        "validate_on_training_data",
        *DEVICE,
        "scale_lr",
        "drop_momentum",
        "scheduler_step_per_batch",
        "drop_scheduler_step",
    }
    assert expected <= names
    for site in found:
        source_file.apply([site])  # every mutant compiles (the engine checks)
    moved = mutate(TRAINER, "scheduler_step_per_batch")
    assert "                self.optimizer.step()\n                self.scheduler.step()\n" in moved
    assert mutate(TRAINER, "validate_on_training_data").count("self.validate(self.train_loader)")


# -- parameters and variants -----------------------------------------------------------------------


def test_variants_are_declared_and_labelled():
    labels = {operator.label for operator in all_variants("optim")}
    assert {"scale_lr", "scale_lr(factor=0.01)"} <= labels
    assert {"change_batch_size", "change_batch_size(factor=0.125)"} <= labels
    assert resolve("change_batch_size(factor=0.125)").params == {"factor": 0.125}


@pytest.mark.parametrize(
    ("before", "factor", "after"),
    [
        ("lr=3e-4", 100.0, "lr=0.03"),
        ("lr=1e-5", 0.01, "lr=1e-7"),
        ("lr=0.1", 100.0, "lr=10.0"),
        ("lr=1", 0.01, "lr=0.01"),
        ("lr=cfg['lr']", 0.01, "lr=cfg['lr'] * 0.01"),
        ("lr=a if b else c", 100.0, "lr=(a if b else c) * 100"),
        ("lr=base * scale", 100.0, "lr=base * scale * 100"),
    ],
)
def test_scaled_learning_rates_render_like_hand_written_code(before, factor, after):
    source = f"import torch\nopt = torch.optim.SGD(ps, {before})\n"
    assert (
        mutate(source, "scale_lr", factor=factor)
        == f"import torch\nopt = torch.optim.SGD(ps, {after})\n"
    )


@pytest.mark.parametrize(
    ("before", "factor", "after"),
    [
        ("batch_size=4", 0.125, "batch_size=1"),
        ("batch_size=64", 0.125, "batch_size=8"),
        ("batch_size=bs", 0.125, "batch_size=max(1, bs // 8)"),
        ("batch_size=bs", 0.3, "batch_size=max(1, int(bs * 0.3))"),
        ("batch_size=bs", 8.0, "batch_size=bs * 8"),
    ],
)
def test_batch_size_factors(before, factor, after):
    source = f"from torch.utils.data import DataLoader\ntrain_loader = DataLoader(ds, {before})\n"
    assert mutate(source, "change_batch_size", factor=factor).endswith(f"DataLoader(ds, {after})\n")


def test_weight_decay_factor_parameter():
    source = "import torch\nopt = torch.optim.SGD(ps, lr=0.1, weight_decay=5e-4)\n"
    assert mutate(source, "weight_decay_too_high", factor=10.0).endswith("weight_decay=0.005)\n")


def test_warmup_constant_is_left_alone_where_zero_would_divide():
    unsafe = "WARMUP = 10\nramp = lambda s: s / WARMUP\nsched = build(opt, ramp)\n"
    guarded = "WARMUP = 10\nramp = lambda s: s / max(1, WARMUP)\nsched = build(opt, ramp)\n"
    assert sites(unsafe, "drop_lr_warmup") == []
    assert mutate(guarded, "drop_lr_warmup").startswith("WARMUP = 0\n")


# -- what the mutants do at run time ------------------------------------------------------------------

torch = pytest.importorskip("torch")

SCRIPT = """\
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)
device = DEVICE
X_train, y_train = torch.randn(64, 4), torch.randint(0, 3, (64,))
X_val, y_val = torch.randn(32, 4), torch.randint(0, 3, (32,))
train_loader = DataLoader(TensorDataset(X_train, y_train), batch_size=8, shuffle=True)
val_loader = DataLoader(TensorDataset(X_val, y_val), batch_size=16)
model = nn.Sequential(nn.Linear(4, 16), nn.Dropout(0.5), nn.Linear(16, 3)).to(device)
criterion = nn.CrossEntropyLoss()
optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=1, gamma=0.5)
log = {"train_modes": [], "val_modes": [], "val_grad": [], "val_hits": [], "val_batches": 0,
       "batch_sizes": [], "lrs": [], "optimizers": []}


def evaluate(model, loader):
    model.eval()
    with torch.no_grad():
        for x, y in loader:
            x, y = x.to(device), y.to(device)
            out = model(x)
            log["val_hits"].append((out.argmax(1) == y).sum())
            log["val_modes"].append(model.training)
            log["val_grad"].append(out.requires_grad)
            log["val_batches"] += 1


for epoch in range(2):
    model.train()
    log["optimizers"].append(id(optimizer))
    for x, y in train_loader:
        x, y = x.to(device), y.to(device)
        log["train_modes"].append(model.training)
        log["batch_sizes"].append(len(x))
        optimizer.zero_grad()
        loss = criterion(model(x), y)
        loss.backward()
        optimizer.step()
    scheduler.step()
    log["lrs"].append(optimizer.param_groups[0]["lr"])
    evaluate(model, val_loader)
"""


def run(source: str, device: str = "cpu") -> dict:
    return run_script(source.replace("DEVICE", repr(device)))


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    # Tiny tensors: with several threads on a shared 2-core machine each run takes ~1 s
    # of contention instead of ~20 ms.
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def reference() -> dict:
    return run(SCRIPT)["log"]


def test_reference_script_behaves_as_written(reference):
    assert all(reference["train_modes"]) and not any(reference["val_modes"])
    assert not any(reference["val_grad"])
    assert reference["val_batches"] == 4 and set(reference["batch_sizes"]) == {8}
    assert reference["lrs"] == pytest.approx([0.025, 0.0125])
    assert len(set(reference["optimizers"])) == 1


def test_mode_mutants_change_the_modes_they_claim(reference):
    dropped_train = run(mutate(SCRIPT, "drop_train_mode"))["log"]["train_modes"]
    assert dropped_train[:8] == [True] * 8 and dropped_train[8:] == [False] * 8
    assert not any(run(mutate(SCRIPT, "eval_mode_before_training"))["log"]["train_modes"])
    assert all(run(mutate(SCRIPT, "drop_eval_mode"))["log"]["val_modes"])
    assert all(run(mutate(SCRIPT, "drop_no_grad"))["log"]["val_grad"])
    assert run(mutate(SCRIPT, "validate_on_training_data"))["log"]["val_batches"] == 16


@pytest.mark.parametrize("name", DEVICE)
def test_device_mutants_crash_off_the_cpu_and_are_silent_on_it(name, reference):
    run(SCRIPT, device="meta")  # the original runs on another device
    source_file = SourceFile(SCRIPT, "t.py")
    found = source_file.find_sites([get_operator(name)])
    assert len(found) == (1 if name == "drop_model_to_device" else 2)  # train and eval loops
    mutants = [source_file.apply([site]).source for site in found]
    for mutant in mutants:
        assert run(mutant)["log"]["lrs"] == reference["lrs"]
        with pytest.raises(RuntimeError, match="device"):
            run(mutant, device="meta")


def test_schedule_mutants_change_the_learning_rate(reference):
    assert run(mutate(SCRIPT, "scale_lr"))["log"]["lrs"] == pytest.approx([2.5, 1.25])
    per_batch = run(mutate(SCRIPT, "scheduler_step_per_batch"))["log"]["lrs"]
    assert per_batch == pytest.approx([0.05 * 0.5**8, 0.05 * 0.5**16])
    assert run(mutate(SCRIPT, "drop_scheduler_step"))["log"]["lrs"] == [0.05, 0.05]


@pytest.mark.filterwarnings("ignore:Detected call of `lr_scheduler.step\\(\\)`:UserWarning")
@pytest.mark.filterwarnings(
    "ignore:Seems like `optimizer.step\\(\\)` has been overridden:UserWarning"
)
def test_optimizer_state_and_settings_mutants(reference):
    recreated = run(mutate(SCRIPT, "optimizer_recreated_each_epoch"))
    assert len(set(recreated["log"]["optimizers"])) == 2
    # The scheduler stays attached: the LR schedule is the reference's, only the optimizer
    # state (the momentum buffers) is lost, which moves the weights.
    assert recreated["log"]["lrs"] == pytest.approx(reference["lrs"])
    assert recreated["scheduler"].optimizer is recreated["optimizer"]
    weights = torch.cat([p.flatten() for p in recreated["model"].parameters()])
    reference_weights = torch.cat([p.flatten() for p in run(SCRIPT)["model"].parameters()])
    assert not torch.allclose(weights, reference_weights)
    assert run(mutate(SCRIPT, "drop_momentum"))["optimizer"].defaults["momentum"] == 0
    bigger = run(mutate(SCRIPT, "change_batch_size"))["log"]["batch_sizes"]
    smaller = run(mutate(SCRIPT, "change_batch_size", factor=0.125))["log"]["batch_sizes"]
    assert set(bigger) == {64} and set(smaller) == {1}


ADAMW = """\
import torch
from torch.optim import AdamW

model = torch.nn.Linear(2, 2)
opt = AdamW(model.parameters(), lr=1e-3, betas=(0.9, 0.98))
WARMUP_STEPS = 10


def schedule(step):
    if step < WARMUP_STEPS:
        return (step + 1) / WARMUP_STEPS
    return 1.0


sched = torch.optim.lr_scheduler.LambdaLR(opt, schedule)
"""


def test_optimizer_choice_mutants_build_what_they_claim():
    sgd = run(mutate(ADAMW, "sgd_instead_of_adam"))["opt"]
    assert type(sgd) is torch.optim.SGD and sgd.defaults["lr"] == 1e-3
    adam = run(mutate(ADAMW, "adam_l2_instead_of_adamw"))["opt"]
    assert type(adam) is torch.optim.Adam and adam.defaults["weight_decay"] == 0.01
    assert run(mutate(ADAMW, "weight_decay_too_high"))["opt"].defaults["weight_decay"] == 1.0


def test_warmup_mutant_starts_at_the_full_learning_rate():
    assert run(ADAMW)["opt"].param_groups[0]["lr"] == pytest.approx(1e-4)
    assert len(sites(ADAMW, "drop_lr_warmup")) == 1  # the branch, not the constant too
    assert run(mutate(ADAMW, "drop_lr_warmup"))["opt"].param_groups[0]["lr"] == pytest.approx(1e-3)
