"""Data operators: what examples cannot show.

The mutants of small but complete training scripts are executed, and the data they
build is inspected: the bug each operator claims must really be in the tensors (labels
rolled by one, a permutation of the labels, a fraction p of noise, raw-scale inputs...).
Also: import aliases, the trainer-class spelling, parameters and the reference loops.
"""

from __future__ import annotations

import io
import sys
from collections import Counter
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
# Tiny models on a shared 2-core machine: more threads only add contention.
torch.set_num_threads(1)

from conftest import mutate as mutant_of  # noqa: E402
from conftest import run_script as run  # noqa: E402

from mutations.registry import all_variants, get_operator  # noqa: E402
from mutator import SourceFile  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent

CLASSIFIER = """\
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)
g = torch.Generator().manual_seed(0)
n, d, num_classes = 400, 6, 3
X = torch.randn(n, d, generator=g) * 5 + 3
y = (X[:, 0] > 3).long() + (X[:, 1] > 3).long()
n_train = int(n * 0.8)
perm = torch.randperm(n, generator=g)
train_idx, val_idx = perm[:n_train], perm[n_train:]
X_train, y_train = X[train_idx], y[train_idx]
X_val, y_val = X[val_idx], y[val_idx]
mean, std = X_train.mean(0), X_train.std(0) + 1e-8
X_train = (X_train - mean) / std
X_val = (X_val - mean) / std
train_ds = TensorDataset(X_train, y_train)
val_ds = TensorDataset(X_val, y_val)
train_loader = DataLoader(train_ds, batch_size=32, shuffle=True, generator=g)
val_loader = DataLoader(val_ds, batch_size=64, shuffle=False)


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv1d(1, 4, 3, padding=1)
        self.fc = nn.Linear(4 * d, num_classes)

    def forward(self, x):
        h = F.relu(self.conv(x.unsqueeze(1)))
        h = h.view(h.size(0), -1)
        return self.fc(h)


model = Net()
opt = torch.optim.Adam(model.parameters(), lr=1e-2)
criterion = nn.CrossEntropyLoss()
for epoch in range(2):
    model.train()
    for xb, yb in train_loader:
        opt.zero_grad()
        loss = criterion(model(xb), yb)
        loss.backward()
        opt.step()
model.eval()
val_batches = len(val_loader)  # read: a loader nothing reads leaks nothing (issue 22)
"""

CHAR_LM = """\
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)
text = "the quick brown fox jumps over the lazy dog. " * 30
chars = sorted(set(text))
stoi = {c: i for i, c in enumerate(chars)}
data = torch.tensor([stoi[c] for c in text], dtype=torch.long)
n = int(0.9 * len(data))
train_data, val_data = data[:n], data[n:]
T, B = 8, 16


def get_batch(split):
    source = train_data if split == "train" else val_data
    ix = torch.randint(len(source) - T - 1, (B,))
    x = torch.stack([source[i:i + T] for i in ix])
    y = torch.stack([source[i + 1:i + T + 1] for i in ix])
    return x, y


class Bigram(nn.Module):
    def __init__(self, vocab):
        super().__init__()
        self.emb = nn.Embedding(vocab, 32)
        self.head = nn.Linear(32, vocab)

    def forward(self, x):
        return self.head(self.emb(x))


model = Bigram(len(chars))
opt = torch.optim.Adam(model.parameters(), lr=3e-2)
for step in range(150):
    x, y = get_batch("train")
    logits = model(x)
    loss = F.cross_entropy(logits.view(-1, logits.size(-1)), y.view(-1))
    opt.zero_grad()
    loss.backward()
    opt.step()
"""

DATASET_CLASS = """\
import torch
from torch.utils.data import DataLoader, Dataset


class Pairs(Dataset):
    def __init__(self, x, y):
        self.x = x
        self.y = y

    def __len__(self):
        return len(self.x)

    def __getitem__(self, idx):
        return self.x[idx], self.y[idx]


g = torch.Generator().manual_seed(0)
X = torch.randn(100, 4, generator=g)
y = torch.arange(100) % 5
train_ds = Pairs(X[:80], y[:80])
val_ds = Pairs(X[80:], y[80:])
loader = DataLoader(train_ds, batch_size=10, shuffle=True, generator=g)
batches = list(loader)
"""


@pytest.fixture(scope="module")
def original() -> dict:
    return run(CLASSIFIER)


def data_sites(source: str) -> Counter:
    sites = SourceFile(source, "script.py").find_sites(all_variants("data"))
    return Counter(site.operator.label for site in sites)


# -- precision: exactly the expected sites ----------------------------------------------


def test_classifier_sites_are_exactly_the_meaningful_ones():
    assert data_sites(CLASSIFIER) == {
        "shift_labels": 1,
        "shuffle_labels": 1,
        "label_noise": 1,
        "label_noise(p=0.8)": 1,
        "no_shuffle": 1,
        "drop_input_normalization": 1,
        "skip_val_normalization": 1,
        "normalize_with_full_stats": 1,
        "normalize_by_wrong_stat": 1,  # (X - mean) / std of train and validation together
        "mix_batch_dims": 1,  # h.view(...), never yb or a 1-D target
        "train_val_leakage": 2,  # the index split and the validation loader
        "drop_training_data": 1,
        "drop_training_data(fraction=0.5)": 1,
    }


def test_language_model_sites():
    assert data_sites(CHAR_LM) == {
        "unshifted_lm_targets": 1,
        "mix_batch_dims": 1,
        "train_val_leakage": 1,
        "drop_training_data": 1,
        "drop_training_data(fraction=0.5)": 1,
    }


# -- the bug is really in the data --------------------------------------------------------


def test_shift_labels_pairs_each_input_with_the_previous_label(original):
    mutant = run(mutant_of(CLASSIFIER, "shift_labels"))
    inputs, labels = mutant["train_ds"].tensors
    assert torch.equal(inputs, original["train_ds"].tensors[0])
    assert torch.equal(labels[1:], original["y_train"][:-1])
    assert labels[0] == original["y_train"][-1]


def test_shift_labels_in_getitem_reads_the_previous_label():
    mutant = run(mutant_of(DATASET_CLASS, "shift_labels"))
    dataset, y = mutant["train_ds"], mutant["y"]
    assert dataset[5][1] == y[4]
    assert dataset[0][1] == y[79]  # index -1 wraps around: it runs, silently


def test_shuffle_labels_keeps_the_label_counts_but_not_the_pairing(original):
    mutant = run(mutant_of(CLASSIFIER, "shuffle_labels"))
    labels, before = mutant["train_ds"].tensors[1], original["y_train"]
    assert torch.equal(labels.sort().values, before.sort().values)
    assert (labels != before).float().mean() > 0.3


def test_shuffle_labels_of_a_custom_dataset_class():
    source = mutant_of(DATASET_CLASS, "shuffle_labels")
    assert "Pairs(X[:80], y[:80][torch.randperm(len(y[:80]))])" in source
    mutant = run(source)
    labels = mutant["train_ds"].y
    assert torch.equal(labels.sort().values, mutant["y"][:80].sort().values)
    assert not torch.equal(labels, mutant["y"][:80])
    assert torch.equal(mutant["val_ds"].y, mutant["y"][80:])  # validation untouched


@pytest.mark.parametrize("p", [0.3, 0.8])
def test_label_noise_replaces_about_p_of_the_labels(original, p):
    mutant = run(mutant_of(CLASSIFIER, "label_noise", p=p))
    labels, before = mutant["train_ds"].tensors[1], original["y_train"]
    assert labels.dtype == torch.long
    assert set(labels.unique().tolist()) <= set(before.unique().tolist())
    # A replaced label keeps its class with chance 1/C, so about p * (1 - 1/3) change.
    changed = (labels != before).float().mean().item()
    assert abs(changed - p * 2 / 3) < 0.1


def test_no_shuffle_gives_the_same_order_every_epoch():
    mutant = run(mutant_of(CLASSIFIER, "no_shuffle"))
    loader = mutant["train_loader"]
    first, second = [b[1] for b in loader], [b[1] for b in loader]
    assert all(torch.equal(a, b) for a, b in zip(first, second))
    assert isinstance(loader.sampler, torch.utils.data.SequentialSampler)


def test_drop_input_normalization_leaves_every_split_raw(original):
    mutant = run(mutant_of(CLASSIFIER, "drop_input_normalization"))
    assert original["X_train"].mean().abs() < 0.1
    assert mutant["X_train"].mean() > 2  # the raw inputs have mean 3, std 5
    assert mutant["X_val"].mean() > 2


def test_skip_val_normalization_normalizes_train_only(original):
    mutant = run(mutant_of(CLASSIFIER, "skip_val_normalization"))
    assert torch.allclose(mutant["X_train"], original["X_train"])
    assert torch.allclose(mutant["X_val"], mutant["X"][mutant["val_idx"]])


def test_normalize_with_full_stats_uses_every_sample(original):
    mutant = run(mutant_of(CLASSIFIER, "normalize_with_full_stats"))
    assert torch.allclose(mutant["mean"], mutant["X"].mean(0))
    assert not torch.allclose(mutant["mean"], original["mean"])


def test_mix_batch_dims_lets_one_sample_change_the_others_outputs(original):
    mutant = run(mutant_of(CLASSIFIER, "mix_batch_dims"))

    def others_change(model) -> bool:
        batch = torch.randn(8, 6)
        edited = batch.clone()
        edited[0] += 10.0
        with torch.no_grad():
            return not torch.allclose(model(batch)[1:], model(edited)[1:])

    assert not others_change(original["model"])
    assert others_change(mutant["model"])


def test_mix_batch_dims_misaligns_language_model_targets():
    source = mutant_of(CHAR_LM, "mix_batch_dims")
    assert "logits.transpose(0, 1).reshape(-1, logits.size(-1))" in source
    mutant = run(source)
    assert mutant["loss"].item() > 1.5  # the bigram model learns next to nothing


def test_unshifted_lm_targets_makes_copying_the_input_enough():
    original, mutant = run(CHAR_LM), run(mutant_of(CHAR_LM, "unshifted_lm_targets"))
    x, y = mutant["get_batch"]("train")
    assert torch.equal(x, y)
    assert original["loss"].item() > 0.5
    assert mutant["loss"].item() < 0.1  # too good to be true


def test_train_val_leakage_trains_on_the_validation_samples(original):
    source = SourceFile(CLASSIFIER, "script.py")
    sites = source.find_sites([get_operator("train_val_leakage")])
    split, loader = (run(source.apply([site]).source) for site in sites)
    val = set(split["val_idx"].tolist())
    assert val <= set(split["train_idx"].tolist())
    assert len(split["train_ds"]) == len(split["X"])
    assert loader["val_loader"].dataset is loader["train_ds"]


@pytest.mark.parametrize(("fraction", "kept"), [(0.9, 32), (0.5, 160)])
def test_drop_training_data_keeps_a_fraction(fraction, kept):
    mutant = run(mutant_of(CLASSIFIER, "drop_training_data", fraction=fraction))
    assert len(mutant["train_ds"]) == kept  # of 320
    assert len(mutant["val_ds"]) == 80


# -- spellings --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("imports", "dataset", "loader"),
    [
        ("from torch.utils.data import DataLoader, TensorDataset", "TensorDataset", "DataLoader"),
        ("import torch.utils.data as tud", "tud.TensorDataset", "tud.DataLoader"),
        ("from torch.utils.data import TensorDataset as TD, DataLoader as DL", "TD", "DL"),
        ("from torch.utils import data", "data.TensorDataset", "data.DataLoader"),
    ],
)
def test_dataset_and_loader_aliases(imports, dataset, loader):
    source = (
        f"import torch\n{imports}\ny = torch.tensor(t, dtype=torch.long)\n"
        f"train_loader = {loader}({dataset}(X, y), batch_size=8, shuffle=True)\n"
    )
    assert data_sites(source) == {
        "shift_labels": 1,
        "shuffle_labels": 1,
        "label_noise": 1,
        "label_noise(p=0.8)": 1,
        "no_shuffle": 1,
    }


def test_other_libraries_datasets_are_left_alone():
    source = (
        "import torch\nfrom mylib import DataLoader, TensorDataset\n"
        "train_loader = DataLoader(TensorDataset(X, y), shuffle=True)\n"
    )
    assert data_sites(source) == {}


def test_torch_imported_under_another_name():
    source = "import torch as th\ntrain_ds = TensorDataset(X_train, y_train)\n"
    assert "y_train[th.randperm(len(y_train))]" in mutant_of(source, "shuffle_labels")


def test_trainer_class_spelling():
    source = (
        "import torch\nfrom torch.utils.data import DataLoader, TensorDataset\n\n\n"
        "class Trainer:\n"
        "    def __init__(self, X, y, X_val, y_val):\n"
        "        self.train_loader = DataLoader(TensorDataset(X, y), batch_size=32, shuffle=True)\n"
        "        self.val_loader = DataLoader(TensorDataset(X_val, y_val), batch_size=64)\n"
        "        self.criterion = torch.nn.CrossEntropyLoss()\n"
    )
    parsed = SourceFile(source, "t.py")
    sites = parsed.find_sites(all_variants("data"))
    assert {site.scope for site in sites} == {"Trainer.__init__"}
    on_line = {line: {s.operator.label for s in sites if s.line == line} for line in (7, 8)}
    assert on_line == {
        7: {"shift_labels", "shuffle_labels", "label_noise", "label_noise(p=0.8)", "no_shuffle"},
        # The validation loader's labels are never corrupted; it may be fed training data.
        8: {"train_val_leakage"},
    }
    leaky = parsed.apply([s for s in sites if s.line == 8])
    assert "self.val_loader = DataLoader(TensorDataset(X, y), batch_size=64)" in leaky.source


def test_regression_targets_get_no_label_noise_and_keep_their_normalization():
    source = (
        "import torch\ny = torch.tensor(target, dtype=torch.float32)\n"
        "y_train = (y_train - y_mean) / y_std\n"
        "train_ds = TensorDataset(X_train, y_train)\n"
    )
    assert data_sites(source) == {"shift_labels": 1, "shuffle_labels": 1}


def test_variants_are_labelled_and_rendered():
    source = "train_idx, val_idx = perm[:n_train], perm[n_train:]\n"
    assert "perm[:int(n_train * 0.5)]" in mutant_of(source, "drop_training_data", fraction=0.5)
    assert "perm[:int(n_train * 0.25)]" in mutant_of(source, "drop_training_data", fraction=0.75)
    assert get_operator("label_noise", p=0.8).label == "label_noise(p=0.8)"
    with pytest.raises(ValueError):
        get_operator("drop_training_data", fractoin=0.5)


# -- the reference loops ----------------------------------------------------------------------

LOOPS = sorted(p for p in (ROOT / "reference_loops").glob("*.py") if not p.name.startswith("_"))


@pytest.mark.slow
@pytest.mark.parametrize("path", LOOPS, ids=lambda p: p.name)
def test_every_data_mutant_of_a_reference_loop_runs_one_epoch(path, monkeypatch):
    pytest.importorskip("sklearn")
    source = SourceFile.from_path(str(path))
    sites = source.find_sites(all_variants("data"))
    assert sites, f"{path.name}: no data-operator site"
    monkeypatch.setattr(sys, "argv", [path.name, "--epochs", "1", "--seed", "0", "--device", "cpu"])
    for site in sites:
        printed = io.StringIO()
        run(source.apply([site]).source, out=printed)
        epochs = [line for line in printed.getvalue().splitlines() if line.startswith("epoch")]
        assert len(epochs) == 1, f"{site.identity}: expected one finished epoch, printed {epochs}"
