"""DCGAN style: a generator ending in Tanh, a discriminator, two Adam optimizers, the fake
batch detached for the discriminator step, and a save_image-like grid helper."""

import argparse

import torch
import torch.nn as nn
import torch.optim as optim
from torch.utils.data import DataLoader, TensorDataset


def make_blobs(n, size, generator):
    """Fake 'images': one bright Gaussian blob per 8x8 picture, scaled to [-1, 1]."""
    grid = torch.arange(size, dtype=torch.float32)
    centres = torch.rand(n, 2, generator=generator) * (size - 3) + 1.5
    dy = (grid[None, :] - centres[:, :1]) ** 2
    dx = (grid[None, :] - centres[:, 1:]) ** 2
    images = torch.exp(-(dy[:, :, None] + dx[:, None, :]) / 2.0)
    return (images * 2 - 1).unsqueeze(1)


class Generator(nn.Module):
    def __init__(self, nz, ngf):
        super().__init__()
        self.main = nn.Sequential(
            nn.ConvTranspose2d(nz, ngf * 2, 4, 1, 0, bias=False),
            nn.BatchNorm2d(ngf * 2),
            nn.ReLU(True),
            nn.ConvTranspose2d(ngf * 2, 1, 4, 2, 1, bias=False),
            nn.Tanh(),
        )

    def forward(self, z):
        return self.main(z)


class Discriminator(nn.Module):
    def __init__(self, ndf):
        super().__init__()
        self.main = nn.Sequential(
            nn.Conv2d(1, ndf, 4, 2, 1, bias=False),
            nn.LeakyReLU(0.2, inplace=True),
            nn.Conv2d(ndf, 1, 4, 1, 0, bias=False),
            nn.Sigmoid(),
        )

    def forward(self, x):
        return self.main(x)


def weights_init(m):
    classname = m.__class__.__name__
    if classname.find("Conv") != -1:
        nn.init.normal_(m.weight, 0.0, 0.02)
    elif classname.find("BatchNorm") != -1:
        nn.init.normal_(m.weight, 1.0, 0.02)
        nn.init.constant_(m.bias, 0)


def save_grid(images, path, nrow=4):
    """torchvision.utils.save_image, in small: tile nrow x nrow pictures into a PGM file."""
    images = images[: nrow * nrow].detach().cpu()
    rows = [torch.cat(list(images[r * nrow : (r + 1) * nrow, 0]), dim=1) for r in range(nrow)]
    grid = ((torch.cat(rows, dim=0) + 1) / 2).clamp(0, 1)
    pixels = (grid * 255).round().int()
    with open(path, "w") as f:
        f.write(f"P2 {pixels.shape[1]} {pixels.shape[0]} 255\n")
        for row in pixels.tolist():
            f.write(" ".join(map(str, row)) + "\n")


def main():
    parser = argparse.ArgumentParser(description="DCGAN on 8x8 blobs")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--niter", type=int, default=3, help="number of epochs")
    parser.add_argument("--n-images", type=int, default=512)
    parser.add_argument("--nz", type=int, default=8)
    parser.add_argument("--lr", type=float, default=0.0002)
    parser.add_argument("--beta1", type=float, default=0.5)
    parser.add_argument("--outf", default=None, help="folder for image grids")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--device", default="cpu")
    args = parser.parse_args()

    torch.manual_seed(args.seed)
    device = torch.device(args.device)
    data = make_blobs(args.n_images, 8, torch.Generator().manual_seed(args.seed))
    dataloader = DataLoader(TensorDataset(data), batch_size=args.batch_size, shuffle=True)

    netG = Generator(args.nz, 16).to(device)
    netG.apply(weights_init)
    netD = Discriminator(16).to(device)
    netD.apply(weights_init)

    criterion = nn.BCELoss()
    fixed_noise = torch.randn(16, args.nz, 1, 1, device=device)
    real_label, fake_label = 1.0, 0.0
    optimizerD = optim.Adam(netD.parameters(), lr=args.lr, betas=(args.beta1, 0.999))
    optimizerG = optim.Adam(netG.parameters(), lr=args.lr, betas=(args.beta1, 0.999))

    for epoch in range(args.niter):
        for i, (real,) in enumerate(dataloader):
            # (1) update D: maximize log(D(x)) + log(1 - D(G(z)))
            netD.zero_grad()
            real = real.to(device)
            b_size = real.size(0)
            label = torch.full((b_size,), real_label, dtype=real.dtype, device=device)
            output = netD(real).view(-1)
            errD_real = criterion(output, label)
            errD_real.backward()
            noise = torch.randn(b_size, args.nz, 1, 1, device=device)
            fake = netG(noise)
            label.fill_(fake_label)
            output = netD(fake.detach()).view(-1)
            errD_fake = criterion(output, label)
            errD_fake.backward()
            errD = errD_real + errD_fake
            optimizerD.step()

            # (2) update G: maximize log(D(G(z)))
            netG.zero_grad()
            label.fill_(real_label)
            output = netD(fake).view(-1)
            errG = criterion(output, label)
            errG.backward()
            optimizerG.step()
        print(f"epoch {epoch} loss_D {errD.item():.4f} loss_G {errG.item():.4f}")
        if args.outf is not None:
            with torch.no_grad():
                save_grid(netG(fixed_noise), f"{args.outf}/fake_epoch_{epoch:03d}.pgm")


if __name__ == "__main__":
    main()
