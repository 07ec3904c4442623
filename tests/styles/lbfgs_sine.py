"""Time-sequence-prediction example style: two LSTMCells learn sine waves in double
precision with LBFGS and optimizer.step(closure); after each step it predicts the future
of held-out waves and can write them out for plotting."""

import argparse

import numpy as np
import torch
import torch.nn as nn
import torch.optim as optim


def make_waves(n, length, period, rng):
    x = np.array(range(length)) + rng.randint(-4 * period, 4 * period, n).reshape(n, 1)
    return np.sin(x / 1.0 / period).astype("float64")


class Sequence(nn.Module):
    def __init__(self, hidden=24):
        super().__init__()
        self.hidden = hidden
        self.lstm1 = nn.LSTMCell(1, hidden)
        self.lstm2 = nn.LSTMCell(hidden, hidden)
        self.linear = nn.Linear(hidden, 1)

    def forward(self, input, future=0):
        outputs = []
        h_t = torch.zeros(input.size(0), self.hidden, dtype=torch.double)
        c_t = torch.zeros(input.size(0), self.hidden, dtype=torch.double)
        h_t2 = torch.zeros(input.size(0), self.hidden, dtype=torch.double)
        c_t2 = torch.zeros(input.size(0), self.hidden, dtype=torch.double)

        for input_t in input.split(1, dim=1):
            h_t, c_t = self.lstm1(input_t, (h_t, c_t))
            h_t2, c_t2 = self.lstm2(h_t, (h_t2, c_t2))
            output = self.linear(h_t2)
            outputs += [output]
        for i in range(future):  # if we should predict the future
            h_t, c_t = self.lstm1(output, (h_t, c_t))
            h_t2, c_t2 = self.lstm2(h_t, (h_t2, c_t2))
            output = self.linear(h_t2)
            outputs += [output]
        return torch.cat(outputs, dim=1)


def draw(predictions, n_input, path):
    """What the example plots with matplotlib, as CSV: observed part, then the future."""
    with open(path, "w") as f:
        for wave in predictions:
            observed, future = wave[:n_input], wave[n_input:]
            f.write(",".join(f"{v:.4f}" for v in observed) + ";" + ",".join(f"{v:.4f}" for v in future) + "\n")


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=4, help="steps to run")
    parser.add_argument("--waves", type=int, default=24)
    parser.add_argument("--length", type=int, default=60)
    parser.add_argument("--future", type=int, default=20)
    parser.add_argument("--plot", default=None, help="write predictions to this CSV file")
    parser.add_argument("--seed", type=int, default=0)
    opt = parser.parse_args()
    np.random.seed(opt.seed)
    torch.manual_seed(opt.seed)
    data = make_waves(opt.waves, opt.length, 20, np.random.RandomState(opt.seed))
    input = torch.from_numpy(data[3:, :-1])
    target = torch.from_numpy(data[3:, 1:])
    test_input = torch.from_numpy(data[:3, :-1])
    test_target = torch.from_numpy(data[:3, 1:])

    seq = Sequence()
    seq.double()
    criterion = nn.MSELoss()
    optimizer = optim.LBFGS(seq.parameters(), lr=0.8, max_iter=8)
    for i in range(opt.steps):
        print("STEP: ", i)

        def closure():
            optimizer.zero_grad()
            out = seq(input)
            loss = criterion(out, target)
            print("loss:", loss.item())
            loss.backward()
            return loss

        optimizer.step(closure)
        # begin to predict, no need to track gradient here
        with torch.no_grad():
            future = opt.future
            pred = seq(test_input, future=future)
            loss = criterion(pred[:, :-future], test_target)
            print("test loss:", loss.item())
            y = pred.detach().numpy()
        if opt.plot:
            draw(y, test_input.size(1), opt.plot)
