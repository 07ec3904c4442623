"""Gradient and checkpoint operators: spellings the examples cannot show, and what mutants do.

The first half checks where operators apply across loop styles (flat script, function,
trainer class), optimizer names and import aliases. The second half runs mutants of tiny
training scripts and checks the effect each operator's docstring claims.
"""

from __future__ import annotations

import textwrap

import pytest
from conftest import mutants, only_mutant, sites
from conftest import run_script as run

from mutations.registry import get_operator, operator_classes
from mutator import Mutant, SourceFile


def changed_lines(mutant: Mutant) -> list[str]:
    return [
        line[1:].strip()
        for line in mutant.diff.splitlines()[2:]
        if line.startswith(("+", "-")) and line[1:].strip()
    ]


# -- where operators apply -----------------------------------------------------------------

FLAT = """
import torch
from torch import nn
model = nn.Linear(4, 2)
criterion = nn.CrossEntropyLoss()
{opt} = torch.optim.SGD(model.parameters(), lr=0.1)
scheduler = torch.optim.lr_scheduler.StepLR({opt}, step_size=1)
for epoch in range(2):
    for x, y in loader:
        {opt}.zero_grad(set_to_none=True)
        loss = criterion(model(x), y)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        {opt}.step()
        total_loss += loss.item()
    scheduler.step()
"""

FUNCTION = """
import torch
import torch.nn.functional as F
def train_one_epoch(model, loader, {opt}: torch.optim.Optimizer, sched):
    for x, y in loader:
        {opt}.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        {opt}.step()
        total_loss += loss.item() * x.size(0)
    sched.step()
"""

TRAINER = """
import torch
from torch import nn, optim
class Trainer:
    def __init__(self, model):
        self.model = model
        self.criterion = nn.CrossEntropyLoss()
        self.{opt} = optim.AdamW(self.model.parameters(), lr=1e-3)
        self.lr_schedule = optim.lr_scheduler.OneCycleLR(self.{opt}, max_lr=0.1, total_steps=10)
    def fit(self, loader):
        for x, y in loader:
            self.{opt}.zero_grad(set_to_none=True)
            loss = self.criterion(self.model(x), y)
            loss.backward()
            nn.utils.clip_grad_norm_(self.model.parameters(), max_norm=1.0)
            self.{opt}.step()
            self.lr_schedule.step()
            total_loss += loss.item()
"""

STYLES = {"flat": FLAT, "function": FUNCTION, "trainer": TRAINER}
OPTIMIZER_NAMES = ("opt", "optim", "optimizer")
EXPECTED_ONE_SITE = (
    "drop_backward",
    "drop_optimizer_step",
    "step_before_backward",
    "step_outside_batch_loop",
    "loss_from_item",
    "accumulate_loss_graph",
    "drop_grad_clipping",
    "clip_before_backward",
)


@pytest.mark.parametrize("style", list(STYLES))
@pytest.mark.parametrize("opt", OPTIMIZER_NAMES)
def test_operators_have_one_site_in_every_loop_style(style, opt):
    source_file = SourceFile(textwrap.dedent(STYLES[style].format(opt=opt)), "t.py")
    found = source_file.find_sites([get_operator(name) for name in EXPECTED_ONE_SITE])
    assert sorted(site.operator.name for site in found) == sorted(EXPECTED_ONE_SITE)
    for site in found:
        mutant = source_file.apply([site])
        # The scheduler's step is never taken for the optimizer's.
        assert not any("sched" in line for line in changed_lines(mutant)), mutant.diff


@pytest.mark.parametrize("style", list(STYLES))
def test_step_operators_touch_the_optimizer_not_the_scheduler(style):
    source = STYLES[style].format(opt="optimizer")
    mutant = only_mutant(source, "drop_optimizer_step")
    assert changed_lines(mutant) == [
        "self.optimizer.step()" if style == "trainer" else "optimizer.step()"
    ]


def test_optimizer_partial_params_in_every_style():
    for style, template in STYLES.items():
        found = mutants(template.format(opt="optimizer"), "optimizer_partial_params")
        if style == "function":
            assert found == []  # the optimizer is built elsewhere
            continue
        if style == "flat":  # nn.Linear(4, 2): [-2:] keeps both tensors, an equivalent mutant
            source = SourceFile(textwrap.dedent(template.format(opt="optimizer")), "t.py")
            rejected = source.survey([get_operator("optimizer_partial_params")]).rejected
            assert found == [] and "2 parameter tensors" in rejected[0].reason
            continue
        assert len(found) == 1
        assert "(list(" in found[0].source and ".parameters())[-2:]" in found[0].source


def test_constructor_beats_the_name():
    source = """
    import torch
    from torch.optim.lr_scheduler import StepLR as Decay
    opt_decay = Decay(tracker, 1)
    tracker = torch.optim.SGD(model.parameters(), lr=0.1)
    loss.backward()
    opt_decay.step()
    tracker.step()
    """
    mutant = only_mutant(source, "drop_optimizer_step")
    assert changed_lines(mutant) == ["tracker.step()"]


def test_parameter_annotation_identifies_the_optimizer():
    source = """
    import torch
    def step(o: torch.optim.Optimizer, s: torch.optim.lr_scheduler.LRScheduler, loss):
        loss.backward()
        o.step()
        s.step()
    """
    assert changed_lines(only_mutant(source, "drop_optimizer_step")) == ["o.step()"]


def test_amp_spelling():
    source = """
    import torch
    scaler = torch.amp.GradScaler("cuda")
    for x, y in loader:
        optimizer.zero_grad()
        with torch.autocast("cuda"):
            loss = criterion(model(x), y) / accum_steps
        scaler.scale(loss).backward()
        scaler.unscale_(optimizer)
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        scaler.step(optimizer)
        scaler.update()
    """
    assert changed_lines(only_mutant(source, "drop_backward")) == ["scaler.scale(loss).backward()"]
    assert changed_lines(only_mutant(source, "drop_optimizer_step")) == ["scaler.step(optimizer)"]
    moved = only_mutant(source, "step_before_backward").source
    assert moved.index("scaler.step(optimizer)") < moved.index("scaler.scale(loss).backward()")
    unscaled = only_mutant(source, "unscaled_grad_accumulation")
    assert "loss = criterion(model(x), y)\n" in unscaled.source
    rebuilt = only_mutant(source, "loss_from_item")
    assert "torch.tensor(criterion(model(x), y).item(), requires_grad=True) / accum_steps" in (
        rebuilt.source
    )


@pytest.mark.parametrize(
    ("imports", "call"),
    [
        ("from torch.nn import CrossEntropyLoss as CE\ncrit = CE()", "crit(out, y)"),
        ("import torch.nn as nn\nloss_fn = nn.MSELoss()", "loss_fn(out, y)"),
        ("import torch.nn.functional as Fn", "Fn.cross_entropy(out, y)"),
        ("from torch.nn.functional import nll_loss", "nll_loss(out, y)"),
        ("import torch", "torch.nn.functional.binary_cross_entropy_with_logits(out, y)"),
    ],
)
def test_loss_from_item_resolves_loss_spellings(imports, call):
    source = f"import torch\n{imports}\nloss = {call}\nloss.backward()\n"
    mutant = only_mutant(source, "loss_from_item")
    assert f"loss = torch.tensor({call}.item(), requires_grad=True)\n" in mutant.source


def test_loss_from_item_ignores_the_criterion_constructor_and_follows_renames():
    source = """
    import torch as th
    from torch import nn
    criterion = nn.CrossEntropyLoss()
    raw = criterion(out, y)
    scaled = raw * 0.5
    scaled.backward()
    """
    mutant = only_mutant(source, "loss_from_item")
    assert changed_lines(mutant)[-1] == (
        "raw = th.tensor(criterion(out, y).item(), requires_grad=True)"
    )


def test_loss_helpers_are_not_sites_when_never_backpropagated():
    source = """
    import torch
    def evaluate(model, loader, criterion):
        for x, y in loader:
            loss = criterion(model(x), y)
            total += loss.item()
    def train(model, loader, criterion):
        for x, y in loader:
            loss = criterion(model(x), y)
            loss.backward()
    """
    found = sites(source, "loss_from_item")
    assert [site.scope for site in found] == ["train"]


def test_accumulate_loss_graph_skips_evaluation_under_no_grad_decorator():
    source = """
    import torch
    @torch.no_grad()
    def evaluate(loss):
        total += loss.item()
        loss.backward()
    def train(loss):
        loss.backward()
        total += loss.item()
    """
    assert [site.scope for site in sites(source, "accumulate_loss_graph")] == ["train"]


def test_optimizer_partial_params_keep_parameter_and_label():
    source = "import torch\nopt = torch.optim.Adam(net.parameters())\n"
    mutant = only_mutant(source, "optimizer_partial_params", keep=4)
    assert "torch.optim.Adam(list(net.parameters())[-4:])" in mutant.source
    assert "optimizer_partial_params(keep=4)" in mutant.identity


def test_detach_hidden_through_local_base_class_and_layer_loop():
    source = """
    import torch.nn as nn
    class Base(nn.Module):
        pass
    class Deep(Base):
        def forward(self, x):
            x = self.embed(x)
            for block in self.blocks:
                x = block(x)
            x = self.norm(x)
            return self.head(x)
    """
    lines = [changed_lines(m)[-1] for m in mutants(source, "detach_hidden")]
    assert lines == [
        "x = self.embed(x).detach()",
        "x = block(x).detach()",
        "x = self.norm(x).detach()",
    ]


def test_detach_hidden_cuts_each_layer_once():
    source = """
    from torch import nn
    import torch.nn.functional as F
    class MLP(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc1, self.fc2, self.fc3 = nn.Linear(4, 8), nn.Linear(8, 8), nn.Linear(8, 2)
            self.dropout = nn.Dropout(0.2)
        def forward(self, x):
            x = F.relu(self.fc1(x))
            x = self.dropout(x)
            x = F.relu(self.fc2(x))
            x = self.dropout(x)
            return self.fc3(x)
    """
    # The dropout lines would cut the same layers as the lines above them.
    lines = [changed_lines(m)[-1] for m in mutants(source, "detach_hidden")]
    assert lines == ["x = F.relu(self.fc1(x)).detach()", "x = F.relu(self.fc2(x)).detach()"]


def test_gradient_category_holds_the_specified_operators():
    names = {name for name, cls in operator_classes().items() if cls.category == "gradient"}
    assert {
        "drop_zero_grad",
        "zero_grad_after_backward",
        "drop_backward",
        "drop_optimizer_step",
        "step_before_backward",
        "detach_hidden",
        "loss_from_item",
        "accumulate_loss_graph",
        "optimizer_partial_params",
        "drop_grad_clipping",
        "clip_before_backward",
        "unscaled_grad_accumulation",
    } <= names
    checkpoint = {name for name, cls in operator_classes().items() if cls.category == "checkpoint"}
    assert {"resume_without_optimizer_state", "drop_load_state_dict"} <= checkpoint


# -- what mutants do ----------------------------------------------------------------------

torch = pytest.importorskip("torch")

TRAIN = """
import torch
from torch import nn
torch.manual_seed(0)
X = torch.randn(64, 4)
Y = (X[:, 0] + X[:, 1] > 0).long()
batches = [(X[i : i + 16], Y[i : i + 16]) for i in range(0, 64, 16)]
class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(4, 8)
        self.fc2 = nn.Linear(8, 2)
    def forward(self, x):
        h = torch.relu(self.fc1(x))
        return self.fc2(h)
model = Net()
initial = [p.detach().clone() for p in model.parameters()]
criterion = nn.CrossEntropyLoss()
optimizer = torch.optim.SGD(model.parameters(), lr=0.5)
updates = []
optimizer.register_step_post_hook(lambda *args: updates.append(1))
norms = []
for epoch in range(3):
    total_loss = 0.0
    for x, y in batches:
        optimizer.zero_grad()
        loss = criterion(model(x), y)
        loss.backward()
        norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 0.05)
        norms.append(float(norm))
        optimizer.step()
        total_loss += loss.item()
"""


def moved(namespace: dict) -> list[bool]:
    """Per parameter tensor (fc1.w, fc1.b, fc2.w, fc2.b): did training change it?"""
    params = list(namespace["model"].parameters())
    return [not torch.equal(p, p0) for p, p0 in zip(params, namespace["initial"])]


def test_reference_training_script_moves_every_parameter():
    namespace = run(TRAIN)
    assert moved(namespace) == [True] * 4
    assert len(namespace["updates"]) == 12
    assert isinstance(namespace["total_loss"], float)
    assert min(namespace["norms"]) > 0


@pytest.mark.parametrize(
    "operator", ["drop_backward", "drop_optimizer_step", "step_before_backward", "loss_from_item"]
)
def test_mutant_never_changes_the_weights(operator):
    namespace = run(only_mutant(TRAIN, operator).source)
    assert moved(namespace) == [False] * 4


def test_step_outside_batch_loop_updates_once_per_epoch():
    namespace = run(only_mutant(TRAIN, "step_outside_batch_loop").source)
    assert len(namespace["updates"]) == 3
    assert moved(namespace) == [True] * 4


def test_detach_hidden_freezes_the_layers_before_the_cut():
    namespace = run(only_mutant(TRAIN, "detach_hidden").source)
    assert moved(namespace) == [False, False, True, True]


def test_optimizer_partial_params_trains_only_the_last_layer():
    namespace = run(only_mutant(TRAIN, "optimizer_partial_params").source)
    assert moved(namespace) == [False, False, True, True]


def test_accumulate_loss_graph_keeps_a_graph():
    namespace = run(only_mutant(TRAIN, "accumulate_loss_graph").source)
    total = namespace["total_loss"]
    assert isinstance(total, torch.Tensor) and total.grad_fn is not None
    assert moved(namespace) == [True] * 4  # training itself is unaffected


def test_clipping_mutants_train_like_an_unclipped_run():
    unclipped = run(TRAIN.replace("0.05)", "float('inf'))"))
    clipped = run(TRAIN)
    early = run(only_mutant(TRAIN, "clip_before_backward").source)
    assert early["norms"] == [0.0] * 12  # it only ever saw cleared gradients
    # ``norm = clip_grad_norm_(...)``, logged: still computed, nothing clipped (issue 29).
    logged = run(only_mutant(TRAIN, "drop_grad_clipping").source)
    assert logged["norms"] == unclipped["norms"]
    plain = TRAIN.replace("norm = torch.nn", "torch.nn").replace("norms.append(float(norm))", "")
    dropped = run(only_mutant(plain, "drop_grad_clipping").source)
    for mutant in (early, dropped, logged):
        for param, expected in zip(mutant["model"].parameters(), unclipped["model"].parameters()):
            assert torch.allclose(param, expected)
    differs = [
        not torch.allclose(a, b)
        for a, b in zip(clipped["model"].parameters(), unclipped["model"].parameters())
    ]
    assert any(differs), "clipping at 0.05 must matter in this script"


ACCUMULATE = """
import torch
torch.manual_seed(0)
model = torch.nn.Linear(3, 1)
initial = model.weight.detach().clone()
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
accum_steps = 4
data = [(torch.randn(8, 3), torch.randn(8, 1)) for _ in range(accum_steps)]
optimizer.zero_grad()
for i, (x, y) in enumerate(data):
    loss = torch.nn.functional.mse_loss(model(x), y)
    loss = loss / accum_steps
    loss.backward()
    if (i + 1) % accum_steps == 0:
        optimizer.step()
        optimizer.zero_grad()
update = model.weight.detach() - initial
"""


def test_unscaled_grad_accumulation_multiplies_the_update():
    reference = run(ACCUMULATE)["update"]
    mutated = run(only_mutant(ACCUMULATE, "unscaled_grad_accumulation").source)["update"]
    assert torch.allclose(mutated, 4 * reference, rtol=1e-4)


TBPTT = """
import torch
torch.manual_seed(0)
rnn = torch.nn.RNN(2, 4, batch_first=True)
head = torch.nn.Linear(4, 1)
optimizer = torch.optim.SGD([*rnn.parameters(), *head.parameters()], lr=0.1)
hidden = torch.zeros(1, 3, 4)
for step in range(3):
    x, y = torch.randn(3, 5, 2), torch.randn(3, 1)
    hidden = hidden.detach()
    out, hidden = rnn(x, hidden)
    loss = torch.nn.functional.mse_loss(head(out[:, -1]), y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
"""


def test_drop_hidden_detach_crashes_on_the_second_backward():
    run(TBPTT)
    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        run(only_mutant(TBPTT, "drop_hidden_detach").source)


RESUME = """
import copy
import torch
torch.manual_seed(0)
def build():
    model = torch.nn.Linear(3, 2)
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda epoch: 0.5**epoch)
    return model, optimizer, scheduler
def train(model, optimizer, scheduler, steps):
    for _ in range(steps):
        optimizer.zero_grad()
        model(torch.randn(4, 3)).pow(2).mean().backward()
        optimizer.step()
        scheduler.step()
model, optimizer, scheduler = build()
train(model, optimizer, scheduler, 3)
best_state = copy.deepcopy(model.state_dict())
ckpt = {
    "model": copy.deepcopy(model.state_dict()),
    "optimizer": copy.deepcopy(optimizer.state_dict()),
    "scheduler": scheduler.state_dict(),
}
train(model, optimizer, scheduler, 2)
model, optimizer, scheduler = build()
model.load_state_dict(ckpt["model"])
optimizer.load_state_dict(ckpt["optimizer"])
scheduler.load_state_dict(ckpt["scheduler"])
optimizer.step()  # no gradients here: only keeps the scheduler's order warning quiet
scheduler.step()
"""


def test_resume_reference_restores_everything():
    namespace = run(RESUME)
    assert torch.equal(namespace["model"].weight, namespace["ckpt"]["model"]["weight"])
    assert namespace["optimizer"].state[namespace["model"].weight]["step"] == 3
    assert namespace["scheduler"].last_epoch == 4
    assert namespace["optimizer"].param_groups[0]["lr"] == pytest.approx(0.01 * 0.5**4)
    assert torch.equal(namespace["best_state"]["weight"], namespace["ckpt"]["model"]["weight"])


def test_resume_without_optimizer_state_resets_adam():
    namespace = run(only_mutant(RESUME, "resume_without_optimizer_state").source)
    assert not namespace["optimizer"].state  # no moments, no step count: Adam starts over
    assert torch.equal(namespace["ckpt"]["model"]["weight"], namespace["best_state"]["weight"])


def test_drop_load_state_dict_restarts_from_fresh_weights():
    namespace = run(only_mutant(RESUME, "drop_load_state_dict").source)
    weights = namespace["model"].weight.detach()
    assert not torch.allclose(weights, namespace["ckpt"]["model"]["weight"], atol=0.05)
    assert namespace["optimizer"].state[namespace["model"].weight]["step"] == 3


def test_drop_scheduler_state_restarts_the_schedule():
    namespace = run(only_mutant(RESUME, "drop_scheduler_state_on_resume").source)
    assert namespace["scheduler"].last_epoch == 1
    assert namespace["optimizer"].param_groups[0]["lr"] == pytest.approx(0.01 * 0.5)


def test_best_state_without_copy_tracks_the_live_weights():
    found = mutants(RESUME, "best_state_without_copy")
    # Only the kept "best" copy is a site: copies inside the checkpoint dict are consumed there.
    assert [changed_lines(m)[-1] for m in found] == ["best_state = model.state_dict()"]
    namespace = run(found[0].source)
    # Two more training steps ran after "best" was taken: it followed them.
    assert not torch.equal(namespace["best_state"]["weight"], namespace["ckpt"]["model"]["weight"])
