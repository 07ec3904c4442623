"""word_language_model style: module-level hyperparameters, truncated BPTT with the hidden
state carried and repackaged, a hand-written SGD update with a large learning rate that is
annealed by hand when validation stops improving, clipping with a module constant."""

import math

import torch
import torch.nn as nn

LR = 20.0
CLIP = 0.25
BPTT = 12
EPOCHS = 3
VOCAB = 30


class RNNModel(nn.Module):
    def __init__(self, ntoken, nhid=32):
        super().__init__()
        self.encoder = nn.Embedding(ntoken, nhid)
        self.rnn = nn.LSTM(nhid, nhid)
        self.decoder = nn.Linear(nhid, ntoken)

    def forward(self, x, hidden):
        output, hidden = self.rnn(self.encoder(x), hidden)
        return self.decoder(output), hidden

    def init_hidden(self, bsz):
        weight = next(self.parameters())
        return (weight.new_zeros(1, bsz, 32), weight.new_zeros(1, bsz, 32))


def repackage_hidden(h):
    if isinstance(h, torch.Tensor):
        return h.detach()
    return tuple(repackage_hidden(v) for v in h)


def batchify(data, bsz):
    nbatch = data.size(0) // bsz
    return data[: nbatch * bsz].view(bsz, -1).t().contiguous()


def get_batch(source, i):
    seq_len = min(BPTT, len(source) - 1 - i)
    return source[i : i + seq_len], source[i + 1 : i + 1 + seq_len].reshape(-1)


def train(model, criterion, train_data, lr):
    model.train()
    hidden = model.init_hidden(train_data.size(1))
    for i in range(0, train_data.size(0) - 1, BPTT):
        data, targets = get_batch(train_data, i)
        hidden = repackage_hidden(hidden)
        model.zero_grad()
        output, hidden = model(data, hidden)
        loss = criterion(output.view(-1, VOCAB), targets)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), CLIP)
        for p in model.parameters():
            p.data.add_(p.grad, alpha=-lr)


def evaluate(model, criterion, data_source):
    model.eval()
    total_loss = 0.0
    hidden = model.init_hidden(data_source.size(1))
    with torch.no_grad():
        for i in range(0, data_source.size(0) - 1, BPTT):
            data, targets = get_batch(data_source, i)
            output, hidden = model(data, hidden)
            total_loss += len(data) * criterion(output.view(-1, VOCAB), targets).item()
    return total_loss / (len(data_source) - 1)


def main():
    torch.manual_seed(0)
    corpus = torch.randint(0, VOCAB, (3000,))
    train_data, val_data = batchify(corpus[:2400], 8), batchify(corpus[2400:], 4)
    model = RNNModel(VOCAB)
    criterion = nn.CrossEntropyLoss()
    lr, best_val_loss = LR, None
    for epoch in range(1, EPOCHS + 1):
        train(model, criterion, train_data, lr)
        val_loss = evaluate(model, criterion, val_data)
        print(f"epoch {epoch} valid ppl {math.exp(val_loss):8.2f}")
        if best_val_loss is None or val_loss < best_val_loss:
            best_val_loss = val_loss
        else:
            lr /= 4.0


if __name__ == "__main__":
    main()
