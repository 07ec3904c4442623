"""Word-language-model example style: a corpus batchified into columns, truncated BPTT with
repackage_hidden, gradient clipping, a hand-written SGD update and lr /= 4.0 whenever the
validation loss stops improving. Everything at module level, as in the example."""

import argparse
import math
import random

import torch
import torch.nn as nn
import torch.nn.functional as F

parser = argparse.ArgumentParser(description="LSTM language model on a generated corpus")
parser.add_argument("--emsize", type=int, default=32)
parser.add_argument("--nhid", type=int, default=64)
parser.add_argument("--lr", type=float, default=20)
parser.add_argument("--clip", type=float, default=0.25)
parser.add_argument("--epochs", type=int, default=4)
parser.add_argument("--batch_size", type=int, default=20)
parser.add_argument("--bptt", type=int, default=20)
parser.add_argument("--dropout", type=float, default=0.2)
parser.add_argument("--sentences", type=int, default=1500)
parser.add_argument("--seed", type=int, default=1111)
parser.add_argument("--log-interval", type=int, default=50)
parser.add_argument("--save", type=str, default="model.pt")
parser.add_argument("--device", default="cpu")
args = parser.parse_args()

torch.manual_seed(args.seed)
device = torch.device(args.device)

SUBJECTS = ["the cat", "a dog", "my friend", "the old man", "a bird"]
VERBS = ["sees", "likes", "chases", "finds", "hears"]
OBJECTS = ["the ball", "a tree", "the river", "some bread", "the moon"]


def generate_sentences(n, rng):
    return [f"{rng.choice(SUBJECTS)} {rng.choice(VERBS)} {rng.choice(OBJECTS)} ." for _ in range(n)]


class Dictionary:
    def __init__(self):
        self.word2idx = {}
        self.idx2word = []

    def add_word(self, word):
        if word not in self.word2idx:
            self.idx2word.append(word)
            self.word2idx[word] = len(self.idx2word) - 1
        return self.word2idx[word]

    def __len__(self):
        return len(self.idx2word)


class Corpus:
    def __init__(self, sentences):
        self.dictionary = Dictionary()
        n = len(sentences)
        self.train = self.tokenize(sentences[: int(0.8 * n)])
        self.valid = self.tokenize(sentences[int(0.8 * n) : int(0.9 * n)])
        self.test = self.tokenize(sentences[int(0.9 * n) :])

    def tokenize(self, lines):
        ids = [self.dictionary.add_word(word) for line in lines for word in line.split() + ["<eos>"]]
        return torch.tensor(ids, dtype=torch.long)


corpus = Corpus(generate_sentences(args.sentences, random.Random(args.seed)))


def batchify(data, bsz):
    # Work out how cleanly we can divide the dataset into bsz parts, trim off the rest.
    nbatch = data.size(0) // bsz
    data = data.narrow(0, 0, nbatch * bsz)
    return data.view(bsz, -1).t().contiguous().to(device)


eval_batch_size = 10
train_data = batchify(corpus.train, args.batch_size)
val_data = batchify(corpus.valid, eval_batch_size)
test_data = batchify(corpus.test, eval_batch_size)


class RNNModel(nn.Module):
    def __init__(self, ntoken, ninp, nhid, nlayers, dropout=0.5):
        super().__init__()
        self.ntoken = ntoken
        self.drop = nn.Dropout(dropout)
        self.encoder = nn.Embedding(ntoken, ninp)
        self.rnn = nn.LSTM(ninp, nhid, nlayers, dropout=dropout if nlayers > 1 else 0.0)
        self.decoder = nn.Linear(nhid, ntoken)
        self.nhid, self.nlayers = nhid, nlayers
        self.init_weights()

    def init_weights(self):
        initrange = 0.1
        nn.init.uniform_(self.encoder.weight, -initrange, initrange)
        nn.init.zeros_(self.decoder.bias)
        nn.init.uniform_(self.decoder.weight, -initrange, initrange)

    def forward(self, input, hidden):
        emb = self.drop(self.encoder(input))
        output, hidden = self.rnn(emb, hidden)
        output = self.drop(output)
        decoded = self.decoder(output)
        decoded = decoded.view(-1, self.ntoken)
        return F.log_softmax(decoded, dim=1), hidden

    def init_hidden(self, bsz):
        weight = next(self.parameters())
        return (weight.new_zeros(self.nlayers, bsz, self.nhid), weight.new_zeros(self.nlayers, bsz, self.nhid))


ntokens = len(corpus.dictionary)
model = RNNModel(ntokens, args.emsize, args.nhid, 1, args.dropout).to(device)
criterion = nn.NLLLoss()


def repackage_hidden(h):
    """Wraps hidden states in new Tensors, to detach them from their history."""
    if isinstance(h, torch.Tensor):
        return h.detach()
    return tuple(repackage_hidden(v) for v in h)


def get_batch(source, i):
    seq_len = min(args.bptt, len(source) - 1 - i)
    data = source[i : i + seq_len]
    target = source[i + 1 : i + 1 + seq_len].view(-1)
    return data, target


def evaluate(data_source):
    model.eval()
    total_loss = 0.0
    hidden = model.init_hidden(eval_batch_size)
    with torch.no_grad():
        for i in range(0, data_source.size(0) - 1, args.bptt):
            data, targets = get_batch(data_source, i)
            output, hidden = model(data, hidden)
            hidden = repackage_hidden(hidden)
            total_loss += len(data) * criterion(output, targets).item()
    return total_loss / (len(data_source) - 1)


def train():
    model.train()
    total_loss = 0.0
    hidden = model.init_hidden(args.batch_size)
    for batch, i in enumerate(range(0, train_data.size(0) - 1, args.bptt)):
        data, targets = get_batch(train_data, i)
        # Starting each batch, we detach the hidden state from how it was previously produced.
        hidden = repackage_hidden(hidden)
        model.zero_grad()
        output, hidden = model(data, hidden)
        loss = criterion(output, targets)
        loss.backward()
        # clip_grad_norm_ helps prevent the exploding gradient problem in RNNs / LSTMs.
        torch.nn.utils.clip_grad_norm_(model.parameters(), args.clip)
        for p in model.parameters():
            p.data.add_(p.grad, alpha=-lr)
        total_loss += loss.item()
        if batch % args.log_interval == 0 and batch > 0:
            print(f"| epoch {epoch} | {batch} batches | lr {lr:.2f} | loss {total_loss / args.log_interval:.2f}")
            total_loss = 0.0


lr = args.lr
best_val_loss = None
for epoch in range(1, args.epochs + 1):
    train()
    val_loss = evaluate(val_data)
    print(f"| end of epoch {epoch} | valid loss {val_loss:.2f} | valid ppl {math.exp(val_loss):.2f}")
    if not best_val_loss or val_loss < best_val_loss:
        with open(args.save, "wb") as f:
            torch.save(model.state_dict(), f)
        best_val_loss = val_loss
    else:
        # Anneal the learning rate if no improvement has been seen in the validation dataset.
        lr /= 4.0

with open(args.save, "rb") as f:
    model.load_state_dict(torch.load(f))
test_loss = evaluate(test_data)
print(f"| end of training | test loss {test_loss:.2f} | test ppl {math.exp(test_loss):.2f}")
