"""Every first-order mutant of every reference loop and style script compiles and differs."""

from __future__ import annotations

from pathlib import Path

import pytest

from mutations.registry import all_variants, operator_classes
from mutator import SourceFile

ROOT = Path(__file__).resolve().parent.parent
LOOPS = sorted(p for p in (ROOT / "reference_loops").glob("*.py") if not p.name.startswith("_"))
STYLES = sorted((ROOT / "tests" / "styles").glob("*.py"))


def test_there_are_scripts_to_mutate():
    # An empty parameter list would make the tests below skip silently: fail instead.
    assert LOOPS, "no reference loops found in reference_loops/"
    assert STYLES, "no style scripts found in tests/styles/"


@pytest.mark.parametrize("path", LOOPS + STYLES, ids=lambda p: p.name)
def test_every_mutant_compiles_and_differs(path: Path):
    original = path.read_bytes()
    source = SourceFile.from_path(str(path))
    sites = source.find_sites(all_variants())
    assert sites, f"{path.name} has no sites at all"
    identities = set()
    for site in sites:
        mutant = source.apply([site])  # the engine compiles every mutant
        assert mutant.source != source.source
        assert mutant.source == source.render_whole_module([site]), "splice == full render"
        assert mutant.lines, "a mutant touches at least one line"
        identities.add(mutant.identity)
    assert len(identities) == len(sites), "identities are unique"
    assert path.read_bytes() == original, "the script itself is never modified"


# Style scripts whose zero-grad the operators cannot find yet (issue 14's missed sites).
ZERO_GRAD_MISSED = {
    "manual_sgd_regression.py": "the hand-written param.grad.zero_() has no zero_grad_after_backward move",
    "nanogpt_trainer.py": "zero_grad after the step of an accumulation loop: no move site",
    "fit_library.py": "zero_grad after the step of an accumulation run: no move site",
}


def _styles():
    for path in STYLES:
        missed = ZERO_GRAD_MISSED.get(path.name)
        marks = [pytest.mark.xfail(strict=True, reason=f"issue 14: {missed}")] if missed else []
        yield pytest.param(path, marks=marks, id=path.name)


@pytest.mark.parametrize("path", list(_styles()))
def test_style_scripts_get_the_classic_bugs(path: Path):
    names = {
        site.operator.name for site in SourceFile.from_path(str(path)).find_sites(all_variants())
    }
    assert {"drop_zero_grad", "zero_grad_after_backward"} <= names


# Bugs no reference loop has the code for: each must have a site in a style script instead.
STYLE_ONLY = {
    "amp_without_grad_scaler": "no reference loop uses AMP (imagenet_trainer, nanogpt_trainer)",
    "augment_validation": "no reference loop augments (imagenet_trainer)",
    "clip_without_unscale": "no reference loop uses a GradScaler (nanogpt_trainer)",
    "drop_sampler_set_epoch": "no reference loop uses a DistributedSampler (channels_last_cifar)",
    "gan_fake_not_detached": "no reference loop is a GAN (dcgan)",
    "padding_counted_in_loss": "no reference loop pads sequences (padded_char_lm)",
    "view_instead_of_permute": "no reference loop holds channels-last images (channels_last_cifar)",
    # The operators written for the real-fault replay set (issue 32): code no reference loop has.
    "clamp_bound_flipped": "no reference loop clamps in its loss (siamese, two_head_focal)",
    "drop_class_weight_term": "no reference loop balances classes (two_head_focal)",
    "drop_detach_in_loss": "no reference loop has a constant term in its loss (actor_critic_chain)",
    "drop_loss_reduction": "no reference loop sums loss terms (actor_critic_chain, wgan_gp_toy)",
    "dropout_on_logits": "no reference loop drops out between layers by hand (mnist_nll, rnn_digits)",
    "flatten_all_dims_before_loss": "no reference loop flattens sequence logits (sine_tokens_lm)",
    "hoist_loop_reset": "no reference loop runs episodes (actor_critic_chain)",
    "interpolation_weight_per_element": "no reference loop interpolates batches (wgan_gp_toy)",
    "last_item_instead_of_list": "no reference loop batches collected lists (actor_critic_chain)",
    "linspace_includes_endpoint": "no reference loop generates windows (sine_tokens_lm)",
    "loss_weight_applied_twice": "no reference loop weights a loss helper (wgan_gp_toy)",
    "metric_into_train_accumulator": "no reference loop keeps train/val sums on self (two_head_focal)",
    "optimizer_misses_params": "no reference loop trains two modules (actor_critic_chain)",
    "softmax_overwrites_logits": "no reference loop reuses its logits name (two_head_focal)",
    "stale_fake_in_generator_loss": "no reference loop is a GAN (wgan_gp_toy)",
    "swap_loss_targets": "no reference loop has parallel loss terms (two_head_focal)",
    "wrong_network_in_loss": "no reference loop builds two networks of a class (actor_critic_chain)",
}


def _operators_with_sites(paths) -> set[str]:
    covered = set()
    for path in paths:
        covered |= {
            s.operator.name for s in SourceFile.from_path(str(path)).find_sites(all_variants())
        }
    return covered


def test_every_operator_has_a_site_in_the_reference_loops():
    assert LOOPS, "no reference loops found in reference_loops/"
    covered = _operators_with_sites(LOOPS)
    missing = sorted(set(operator_classes()) - covered - set(STYLE_ONLY))
    assert not missing, f"operators without a site in any reference loop: {missing}"
    assert not set(STYLE_ONLY) & covered, "now in a reference loop: drop it from STYLE_ONLY"


def test_style_only_operators_have_a_site_in_a_style_script():
    missing = sorted(set(STYLE_ONLY) - _operators_with_sites(STYLES))
    assert not missing, f"operators without a site in any style script: {missing}"
