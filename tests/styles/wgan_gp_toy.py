"""WGAN-GP on a generated ring of Gaussians (PyTorch-GAN style): n_critic critic steps per
generator step, a fresh batch generated for each, a gradient-penalty helper whose result
the critic loss weights by lambda_gp."""

import argparse
import math

import torch
import torch.autograd as autograd
import torch.nn as nn

lambda_gp = 10


def ring_batch(n, generator):
    angles = torch.randint(0, 8, (n,), generator=generator).float() * (2 * math.pi / 8)
    centres = torch.stack([torch.cos(angles), torch.sin(angles)], dim=1) * 2.0
    return centres + 0.05 * torch.randn(n, 2, generator=generator)


class Generator(nn.Module):
    def __init__(self, latent_dim):
        super().__init__()
        self.model = nn.Sequential(
            nn.Linear(latent_dim, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 2)
        )

    def forward(self, z):
        return self.model(z)


class Critic(nn.Module):
    def __init__(self):
        super().__init__()
        self.model = nn.Sequential(
            nn.Linear(2, 64), nn.LeakyReLU(0.2), nn.Linear(64, 64), nn.LeakyReLU(0.2), nn.Linear(64, 1)
        )

    def forward(self, x):
        return self.model(x)


def compute_gradient_penalty(critic, real_samples, fake_samples):
    """The WGAN-GP penalty on random points between real and fake samples."""
    alpha = torch.rand(real_samples.size(0), 1)
    interpolates = (alpha * real_samples + (1 - alpha) * fake_samples).requires_grad_(True)
    d_interpolates = critic(interpolates)
    gradients = autograd.grad(
        outputs=d_interpolates,
        inputs=interpolates,
        grad_outputs=torch.ones_like(d_interpolates),
        create_graph=True,
        retain_graph=True,
    )[0]
    gradient_penalty = ((gradients.norm(2, dim=1) - 1) ** 2).mean()
    return gradient_penalty


def main():
    parser = argparse.ArgumentParser(description="WGAN-GP on a ring of Gaussians")
    parser.add_argument("--iterations", type=int, default=200)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--n-critic", type=int, default=5)
    parser.add_argument("--latent-dim", type=int, default=8)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    torch.manual_seed(args.seed)
    data_rng = torch.Generator().manual_seed(args.seed)
    generator, critic = Generator(args.latent_dim), Critic()
    optimizer_G = torch.optim.Adam(generator.parameters(), lr=1e-4, betas=(0.5, 0.9))
    optimizer_D = torch.optim.Adam(critic.parameters(), lr=1e-4, betas=(0.5, 0.9))
    for i in range(args.iterations):
        for _ in range(args.n_critic):
            real = ring_batch(args.batch_size, data_rng)
            optimizer_D.zero_grad()
            z = torch.randn(args.batch_size, args.latent_dim)
            fake_imgs = generator(z)
            gradient_penalty = compute_gradient_penalty(critic, real, fake_imgs.detach())
            d_loss = (
                -torch.mean(critic(real))
                + torch.mean(critic(fake_imgs.detach()))
                + lambda_gp * gradient_penalty
            )
            d_loss.backward()
            optimizer_D.step()
        optimizer_G.zero_grad()
        z = torch.randn(args.batch_size, args.latent_dim)
        gen_imgs = generator(z)
        g_loss = -torch.mean(critic(gen_imgs))
        g_loss.backward()
        optimizer_G.step()
        if i % 50 == 0:
            print(f"iteration {i} d_loss {d_loss.item():.4f} g_loss {g_loss.item():.4f}")


if __name__ == "__main__":
    main()
