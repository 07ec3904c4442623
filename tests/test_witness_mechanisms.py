"""The witness facts of the operators that stand for real faults (issue 32), in-process on
small loops (experiments/harness/probes_mechanism.py, probes.py): each loop takes one
keyword per bug, and each bug must fire its operator's witness against the clean loop's
facts while the clean loop run twice fires nothing."""

from __future__ import annotations

import json

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from experiments.harness import observe
from experiments.harness.probes_reported import reported, with_reported
from experiments.witness import CONFIRMED, UNCONFIRMED, decide, operator_parts
from mutator.witness import FACTS


def observed(loop, **bug):
    """The witness facts of ``loop(**bug)`` run with the probes installed."""
    probes = observe.install()
    try:
        torch.manual_seed(0)
        loop(**bug)
        return probes.facts()
    finally:
        probes.remove()


def verdict(name, mutant, reference, status="ok"):
    return decide(
        operator_parts([name], [{}]),
        {"status": status, "device": "cpu", "seed": 0, "witness": mutant},
        {"status": "ok", "witness": reference},
    )


def _net(n_in=4, n_out=1):
    return nn.Sequential(nn.Linear(n_in, 8), nn.ReLU(), nn.Linear(8, n_out))


def gan(*, stale=False, iterations=3, n_critic=2):
    """A generator and a critic; the generator's loss reads this step's fake, or
    (``stale``) the last critic step's."""
    generator, critic = _net(2, 4), _net(4)
    optimizer_g = torch.optim.Adam(generator.parameters(), lr=1e-3)
    optimizer_d = torch.optim.Adam(critic.parameters(), lr=1e-3)
    for _ in range(iterations):
        for _ in range(n_critic):
            real = torch.randn(16, 4)
            optimizer_d.zero_grad()
            fake = generator(torch.randn(16, 2))
            (critic(fake.detach()).mean() - critic(real).mean()).backward()
            optimizer_d.step()
        optimizer_g.zero_grad()
        made = generator(torch.randn(16, 2))
        (-critic(fake if stale else made).mean()).backward()
        optimizer_g.step()


def actor_critic(*, sibling=False, detach=True, steps=3):
    """A critic with a target copy of its class and an actor: the TD target from the
    target network (``sibling``: from the critic), the advantage detached (or not)."""
    actor, critic, target = _net(), _net(), _net()
    target.load_state_dict(critic.state_dict())
    optimizer = torch.optim.Adam([*actor.parameters(), *critic.parameters()], lr=1e-3)
    for _ in range(steps):
        s, s_next = torch.randn(16, 4), torch.randn(16, 4)
        td_target = 0.9 * (critic if sibling else target)(s_next)
        delta = td_target - critic(s)
        advantage = delta.detach() if detach else delta
        loss = (actor(s) * advantage).mean() + ((critic(s) - td_target.detach()) ** 2).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()


class PairLoss(nn.Module):
    """A loss module of plain tensor code: no functional loss sees its target."""

    def forward(self, prediction, target):
        return ((prediction - target) ** 2).mean()


def classifier(
    *,
    probabilities=False,
    flip_clamp=False,
    unreduced=False,
    extra_dropout=False,
    clip_each_micro_batch=False,
    swap_targets=False,
    steps=4,
):
    """A two-head classifier in two micro-batches per step: cross-entropy on the class,
    a pair loss per head, a clamped penalty, clipping once per step."""
    body, head = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Dropout(0.2)), nn.Linear(16, 5)
    params = [*body.parameters(), *head.parameters()]
    optimizer = torch.optim.SGD(params, lr=0.1)
    pair = PairLoss()
    g = torch.Generator().manual_seed(0)
    x, y = torch.randn(64, 8, generator=g), torch.randint(0, 3, (64,), generator=g)
    y_a, y_b = torch.rand(64, generator=g), torch.rand(64, generator=g)
    for step in range(steps):
        optimizer.zero_grad()
        for micro in range(2):
            rows = slice(16 * (2 * (step % 2) + micro), 16 * (2 * (step % 2) + micro + 1))
            out = head(body(x[rows]))
            if extra_dropout:
                out = F.dropout(out, 0.2, training=True)
            logits, a, b = out[:, :3], out[:, 3], out[:, 4]
            scores = torch.softmax(logits, dim=1) if probabilities else logits
            terms = F.cross_entropy(scores, y[rows], reduction="none")
            targets = (y_b[rows], y_a[rows]) if swap_targets else (y_a[rows], y_b[rows])
            bound = logits.clamp(max=0.5) if flip_clamp else logits.clamp(min=0.5)
            extra = pair(a, targets[0]) + pair(b, targets[1]) + 0.01 * bound.mean()
            if unreduced:  # the element-wise loss backwarded with a gradient per element
                (terms + extra).backward(torch.ones_like(terms))
            else:
                (terms.mean() + extra).backward()
            if clip_each_micro_batch:
                torch.nn.utils.clip_grad_norm_(params, max_norm=10.0)
        if not clip_each_micro_batch:
            torch.nn.utils.clip_grad_norm_(params, max_norm=10.0)
        optimizer.step()


def episodes(*, hoisted=False, count=4):
    """Episodes of an inner ``while not done`` loop, one step each; ``hoisted``: the flag
    reset once before the outer loop."""
    policy = _net()
    optimizer = torch.optim.SGD(policy.parameters(), lr=0.01)
    done = False
    for _ in range(count):
        if not hoisted:
            done = False
        moves = 0
        while not done:
            loss = policy(torch.randn(4, 4)).pow(2).mean()
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            moves += 1
            done = moves == 3


def loader_only(*, shuffle=True, epochs=2):
    """What a loader test does: read the training loader's batches, train nothing."""
    dataset = torch.utils.data.TensorDataset(torch.arange(32.0).unsqueeze(1))
    loader = torch.utils.data.DataLoader(dataset, batch_size=8, shuffle=shuffle)
    for _ in range(epochs):
        for _batch in loader:
            pass


LOOPS = {
    "gan": gan,
    "actor_critic": actor_critic,
    "classifier": classifier,
    "episodes": episodes,
    "loader_only": loader_only,
}


@pytest.fixture(scope="module")
def clean():
    return {name: observed(loop) for name, loop in LOOPS.items()}


# (operator, loop, bug, what the verdict says)
CASES = [
    ("stale_fake_in_generator_loss", "gan", {"stale": True}, "3 vs 0, first after 2 steps"),
    ("wrong_network_in_loss", "actor_critic", {"sibling": True}, "forward_order #1: 0 vs 1"),
    ("drop_detach_in_loss", "actor_critic", {"detach": False}, "4 vs 2"),
    ("softmax_overwrites_logits", "classifier", {"probabilities": True}, "8 vs 0"),
    ("clamp_bound_flipped", "classifier", {"flip_clamp": True}, "3 vs 0"),
    ("drop_loss_reduction", "classifier", {"unreduced": True}, "8 vs 0"),
    ("dropout_on_logits", "classifier", {"extra_dropout": True}, "16 vs 8"),
    ("clip_per_micro_step", "classifier", {"clip_each_micro_batch": True}, "8 vs 4"),
    ("swap_loss_targets", "classifier", {"swap_targets": True}, "second_inputs differ from #0"),
    ("hoist_loop_reset", "episodes", {"hoisted": True}, "3 vs 12"),
    # no forward sees a batch: the loader's order is the only mechanism left to see
    ("no_shuffle", "loader_only", {"shuffle": False}, "unshuffled) order (0 vs 2)"),
]


@pytest.mark.parametrize(("operator", "loop", "bug", "says"), CASES, ids=[c[0] for c in CASES])
def test_the_bug_fires_its_operators_witness(clean, operator, loop, bug, says):
    facts = observed(LOOPS[loop], **bug)
    found = verdict(operator, facts, clean[loop])
    assert found.state == CONFIRMED, found.text
    assert says in found.text


@pytest.mark.parametrize("operator", sorted({c[0] for c in CASES}))
def test_the_clean_loop_run_again_fires_no_witness(clean, operator):
    loop = next(c[1] for c in CASES if c[0] == operator)
    found = verdict(operator, observed(LOOPS[loop]), clean[loop])
    assert found.state == UNCONFIRMED, found.text


def test_what_the_new_facts_hold(clean):
    gan_facts, critic_facts = clean["gan"], clean["actor_critic"]
    assert gan_facts["stale_forward"] == [0, None]
    # The generator's own step trains the generator and the critic forward: two a step.
    assert gan_facts["trained_per_step"] == 2 and gan_facts["forwards"] == 3 * (3 * 2 + 2)
    # target (TD target), critic (advantage), actor, critic (value): in order of first use.
    assert critic_facts["forward_order"][:4] == [0, 1, 2, 1]
    assert len(critic_facts["optimizer"][0]["grad"]) == 8  # a digest, 8 hex digits
    facts = clean["classifier"]
    assert facts["clamp_below"] == 8 and facts["clamp_above"] == 0  # 8 micro-batches
    assert facts["clip_calls"] == 4 and facts["dropout_calls"] == 8
    assert facts["nonscalar_backward"] == [0, None] and facts["ce_on_probabilities"][0] == 0


def test_a_detached_stale_fake_leaves_the_generator_without_gradient(clean):
    def detached(**_):
        generator, critic = _net(2, 4), _net(4)
        optimizer_g = torch.optim.Adam(generator.parameters(), lr=1e-3)
        fake = generator(torch.randn(16, 2)).detach()
        optimizer_g.zero_grad()
        (-critic(fake).mean()).backward()
        optimizer_g.step()

    found = verdict("stale_fake_in_generator_loss", observed(detached), clean["gan"])
    assert found.state == CONFIRMED, found.text


def test_every_fact_a_witness_can_name_is_recorded(clean):
    recorded = set(clean["classifier"]) | {"reported"}  # reported: added as the run ends
    named = {fact for fact in FACTS if not fact.startswith("optimizer.")}
    assert named - recorded == set()


def _trace(path, *numbers, timing=0.0):
    lines = [{"kind": "start", "t": 0.0}]
    for epoch, value in enumerate(numbers):
        lines.append({"kind": "backward", "t": 0.1, "i": epoch, "loss": 1.0, "step": epoch})
        lines.append(
            {
                "kind": "report",
                "t": 0.2 + epoch,
                "source": "stdout",
                "epoch": epoch,
                "val_loss": value,
                "epoch_time": timing,
            }
        )
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


def test_reported_numbers_are_a_fact_of_the_run(tmp_path, clean):
    mine = with_reported(clean["classifier"], _trace(tmp_path / "a.jsonl", 0.5, 0.0))
    theirs = with_reported(clean["classifier"], _trace(tmp_path / "b.jsonl", 0.5, 0.4))
    assert mine["reported"]["n"] == 2
    assert mine["reported"]["at"][0] == [0, "epoch=0 val_loss=0.5"]  # no time, no source
    found = verdict("metric_into_train_accumulator", mine, theirs)
    assert found.state == CONFIRMED and "reported differ from #1" in found.text
    # Two runs that differ only in a time they report are the same run.
    slower = with_reported(clean["classifier"], _trace(tmp_path / "c.jsonl", 0.5, 0.4, timing=9))
    assert verdict("metric_into_train_accumulator", slower, theirs).state == UNCONFIRMED
    assert reported(tmp_path / "missing.jsonl") == {"n": 0, "chain": "00000000", "at": []}
    assert with_reported(None, tmp_path / "a.jsonl") is None


def test_a_fact_the_process_does_not_record_is_not_observed(clean):
    # trainwreck test's child has the probes' facts but no trace of reported numbers.
    found = verdict("metric_into_train_accumulator", clean["gan"], clean["gan"])
    assert found.state == UNCONFIRMED and found.reason == "not_observed", found.text


def test_removing_the_probes_restores_the_clamps_and_cross_entropy():
    before = (torch.clamp, torch.Tensor.clamp, torch.Tensor.clamp_min, F.cross_entropy)
    observe.install().remove()
    after = (torch.clamp, torch.Tensor.clamp, torch.Tensor.clamp_min, F.cross_entropy)
    assert before == after
    # Deleted again, not shadowed: a reused run process compares these namespaces.
    assert "clamp" not in vars(torch.Tensor) and "clamp_max" not in vars(torch.Tensor)


def test_which_loaders_count_as_shuffled():
    from torch.utils import data

    from experiments.harness.probe_loaders import shuffles

    dataset = data.TensorDataset(torch.arange(10.0))

    class Pairs(data.Sampler):  # a batch sampler of the project's own: order unknown
        def __iter__(self):
            return iter([[0, 1], [2, 3]])

        def __len__(self):
            return 2

    assert shuffles(data.DataLoader(dataset, batch_size=2, shuffle=True)) is True
    assert shuffles(data.DataLoader(dataset, batch_size=2)) is False
    assert shuffles(data.DataLoader(dataset, batch_sampler=Pairs())) is None
    weighted = data.WeightedRandomSampler([1.0] * 10, 10)
    assert shuffles(data.DataLoader(dataset, sampler=weighted)) is True
