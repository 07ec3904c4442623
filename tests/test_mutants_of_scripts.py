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
