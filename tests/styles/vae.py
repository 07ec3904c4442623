"""VAE style: encode to (mu, logvar), the reparameterisation trick, a sigmoid decoder and a
custom loss (binary cross-entropy summed over pixels + KL divergence); train()/test()
functions over module-level state, as in the classic example."""

import argparse

import torch
import torch.nn.functional as F
from sklearn.datasets import load_digits
from torch import nn, optim
from torch.utils.data import DataLoader, TensorDataset

parser = argparse.ArgumentParser(description="VAE on scikit-learn digits")
parser.add_argument("--batch-size", type=int, default=64)
parser.add_argument("--epochs", type=int, default=5)
parser.add_argument("--seed", type=int, default=1)
parser.add_argument("--log-interval", type=int, default=10)
parser.add_argument("--save-samples", default=None, help="write a reconstruction grid here")
parser.add_argument("--device", default="cpu")
args = parser.parse_args()

torch.manual_seed(args.seed)
device = torch.device(args.device)

digits = torch.tensor(load_digits().data, dtype=torch.float32)
pixels = digits / 16.0  # [0, 1], what binary cross-entropy expects
train_loader = DataLoader(TensorDataset(pixels[:1500]), batch_size=args.batch_size, shuffle=True)
test_loader = DataLoader(TensorDataset(pixels[1500:]), batch_size=args.batch_size)


class VAE(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(64, 128)
        self.fc21 = nn.Linear(128, 8)
        self.fc22 = nn.Linear(128, 8)
        self.fc3 = nn.Linear(8, 128)
        self.fc4 = nn.Linear(128, 64)

    def encode(self, x):
        h1 = F.relu(self.fc1(x))
        return self.fc21(h1), self.fc22(h1)

    def reparameterize(self, mu, logvar):
        std = torch.exp(0.5 * logvar)
        eps = torch.randn_like(std)
        return mu + eps * std

    def decode(self, z):
        h3 = F.relu(self.fc3(z))
        return torch.sigmoid(self.fc4(h3))

    def forward(self, x):
        mu, logvar = self.encode(x.view(-1, 64))
        z = self.reparameterize(mu, logvar)
        return self.decode(z), mu, logvar


model = VAE().to(device)
optimizer = optim.Adam(model.parameters(), lr=1e-3)


def loss_function(recon_x, x, mu, logvar):
    """Reconstruction + KL divergence, both summed over the batch (Kingma & Welling, App. B)."""
    BCE = F.binary_cross_entropy(recon_x, x.view(-1, 64), reduction="sum")
    KLD = -0.5 * torch.sum(1 + logvar - mu.pow(2) - logvar.exp())
    return BCE + KLD


def save_comparison(data, recon, path, n=8):
    """Originals over reconstructions, one 8x8 digit per cell, as a PGM picture."""
    comparison = torch.cat([data[:n].view(n, 8, 8), recon.view(-1, 8, 8)[:n]])
    rows = [torch.cat(list(comparison[r * n : (r + 1) * n]), dim=1) for r in range(2)]
    picture = (torch.cat(rows, dim=0) * 255).round().int()
    with open(path, "w") as f:
        f.write(f"P2 {picture.shape[1]} {picture.shape[0]} 255\n")
        f.writelines(" ".join(map(str, row)) + "\n" for row in picture.tolist())


def train(epoch):
    model.train()
    train_loss = 0
    for batch_idx, (data,) in enumerate(train_loader):
        data = data.to(device)
        optimizer.zero_grad()
        recon_batch, mu, logvar = model(data)
        loss = loss_function(recon_batch, data, mu, logvar)
        loss.backward()
        train_loss += loss.item()
        optimizer.step()
        if batch_idx % args.log_interval == 0:
            print(f"epoch {epoch} [{batch_idx * len(data)}] batch loss {loss.item() / len(data):.4f}")
    print(f"epoch {epoch} train loss {train_loss / len(train_loader.dataset):.4f}")


def test(epoch):
    model.eval()
    test_loss = 0
    with torch.no_grad():
        for i, (data,) in enumerate(test_loader):
            data = data.to(device)
            recon_batch, mu, logvar = model(data)
            test_loss += loss_function(recon_batch, data, mu, logvar).item()
            if i == 0 and args.save_samples:
                save_comparison(data.cpu(), recon_batch.cpu(), args.save_samples)
    print(f"epoch {epoch} test loss {test_loss / len(test_loader.dataset):.4f}")


if __name__ == "__main__":
    for epoch in range(1, args.epochs + 1):
        train(epoch)
        test(epoch)
