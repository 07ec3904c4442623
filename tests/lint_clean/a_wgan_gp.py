"""WGAN-GP in the PyTorch-GAN style: several critic steps per generator step, a gradient
penalty through torch.autograd.grad(create_graph=True), Adam with betas, the generated
batch detached for the critic; a second, vanilla GAN step that regenerates its fake batch
for the generator (no detach needed there: the generator's gradients are zeroed first)."""

import torch
import torch.nn as nn

LATENT = 8
N_CRITIC = 3
LAMBDA_GP = 10.0


def mlp(n_in, n_out, last=None):
    layers = [nn.Linear(n_in, 32), nn.LeakyReLU(0.2), nn.Linear(32, n_out)]
    return nn.Sequential(*layers, *([last] if last is not None else []))


def gradient_penalty(critic, real, fake):
    alpha = torch.rand(real.size(0), 1)
    mixed = (alpha * real + (1 - alpha) * fake).requires_grad_(True)
    scores = critic(mixed)
    grads = torch.autograd.grad(
        outputs=scores, inputs=mixed, grad_outputs=torch.ones_like(scores),
        create_graph=True, retain_graph=True,
    )[0]
    return ((grads.norm(2, dim=1) - 1) ** 2).mean()


def train_wgan(data, epochs=2):
    generator, critic = mlp(LATENT, 2), mlp(2, 1)
    opt_g = torch.optim.Adam(generator.parameters(), lr=1e-4, betas=(0.0, 0.9))
    opt_c = torch.optim.Adam(critic.parameters(), lr=1e-4, betas=(0.0, 0.9))
    for epoch in range(epochs):
        for i, real in enumerate(data.split(64)):
            opt_c.zero_grad()
            fake = generator(torch.randn(real.size(0), LATENT))
            gp = gradient_penalty(critic, real, fake.detach())
            loss_c = critic(fake.detach()).mean() - critic(real).mean() + LAMBDA_GP * gp
            loss_c.backward()
            opt_c.step()
            if i % N_CRITIC == 0:
                opt_g.zero_grad()
                loss_g = -critic(fake).mean()
                loss_g.backward()
                opt_g.step()
        print(f"wgan epoch {epoch} critic {loss_c.item():.3f}")


def train_vanilla(data, epochs=2):
    generator, discriminator = mlp(LATENT, 2), mlp(2, 1, nn.Sigmoid())
    adversarial_loss = nn.BCELoss()
    optimizer_G = torch.optim.Adam(generator.parameters(), lr=2e-4, betas=(0.5, 0.999))
    optimizer_D = torch.optim.Adam(discriminator.parameters(), lr=2e-4, betas=(0.5, 0.999))
    for epoch in range(epochs):
        for real in data.split(64):
            valid = torch.ones(real.size(0), 1)
            fake_label = torch.zeros(real.size(0), 1)
            optimizer_D.zero_grad()
            gen_imgs = generator(torch.randn(real.size(0), LATENT))
            real_loss = adversarial_loss(discriminator(real), valid)
            fake_loss = adversarial_loss(discriminator(gen_imgs), fake_label)
            d_loss = (real_loss + fake_loss) / 2
            d_loss.backward()
            optimizer_D.step()
            optimizer_G.zero_grad()
            gen_imgs = generator(torch.randn(real.size(0), LATENT))
            g_loss = adversarial_loss(discriminator(gen_imgs), valid)
            g_loss.backward()
            optimizer_G.step()
        print(f"gan epoch {epoch} d {d_loss.item():.3f} g {g_loss.item():.3f}")


if __name__ == "__main__":
    torch.manual_seed(0)
    points = torch.randn(512, 2) * 0.5 + torch.tensor([2.0, -1.0])
    train_wgan(points)
    train_vanilla(points)
