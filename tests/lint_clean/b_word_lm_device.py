"""Correct, word_language_model style: batchify moves the corpus to the device once,
get_batch slices it (no .to in the loop), a sequence-first RNN with attention pooling
over time (softmax over dim 0), packed sequences whose lengths stay on the CPU."""

import argparse

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

BPTT = 35


def batchify(data, bsz, device):
    nbatch = data.size(0) // bsz
    data = data.narrow(0, 0, nbatch * bsz)
    return data.view(bsz, -1).t().contiguous().to(device)


def get_batch(source, i):
    seq_len = min(BPTT, len(source) - 1 - i)
    data = source[i : i + seq_len]
    target = source[i + 1 : i + 1 + seq_len].view(-1)
    return data, target


class RNNModel(nn.Module):
    def __init__(self, ntoken, ninp=32, nhid=64):
        super().__init__()
        self.encoder = nn.Embedding(ntoken, ninp)
        self.rnn = nn.LSTM(ninp, nhid)
        self.score = nn.Linear(nhid, 1)
        self.decoder = nn.Linear(nhid, ntoken)

    def forward(self, x):
        output, _ = self.rnn(self.encoder(x))  # (seq_len, batch, nhid)
        return self.decoder(output)

    def pooled(self, x, lengths):
        packed = pack_padded_sequence(self.encoder(x), lengths, enforce_sorted=False)
        output, _ = pad_packed_sequence(self.rnn(packed)[0])  # (seq_len, batch, nhid)
        weights = F.softmax(self.score(output).squeeze(2), dim=0)  # over time
        return (weights.unsqueeze(2) * output).sum(0)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--seed", type=int, default=1111)
    parser.add_argument("--lr", type=float, default=1.0)
    args = parser.parse_args()
    torch.manual_seed(args.seed)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    corpus = torch.randint(0, 50, (5000,))
    train_data = batchify(corpus[:4000], 20, device)
    val_data = batchify(corpus[4000:], 10, device)
    model = RNNModel(50).to(device)
    criterion = nn.CrossEntropyLoss()
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr)
    model.train()
    for i in range(0, train_data.size(0) - 1, BPTT):
        data, targets = get_batch(train_data, i)
        optimizer.zero_grad()
        output = model(data)
        loss = criterion(output.view(-1, 50), targets)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 0.25)
        optimizer.step()
    model.eval()
    total = 0.0
    with torch.no_grad():
        for i in range(0, val_data.size(0) - 1, BPTT):
            data, targets = get_batch(val_data, i)
            total += len(data) * criterion(model(data).view(-1, 50), targets).item()
    print(f"val loss {total / (len(val_data) - 1):.3f}")
    for x, lengths, y in [
        (torch.randint(0, 50, (7, 4)), torch.tensor([7, 5, 3, 2]), torch.randint(0, 2, (4,)))
    ]:
        x, y = x.to(device), y.to(device)
        summary = model.pooled(x, lengths)
        print(summary.shape, y.shape)


if __name__ == "__main__":
    main()
