"""REINFORCE on a toy bandit-like environment: observations are standardised before the
policy sees them, discounted returns before they weight the log-probabilities."""

import torch
from torch import nn
from torch.distributions import Categorical


class Policy(nn.Module):
    def __init__(self, obs_dim=4, actions=2):
        super().__init__()
        self.affine1 = nn.Linear(obs_dim, 64)
        self.dropout = nn.Dropout(p=0.2)
        self.affine2 = nn.Linear(64, actions)

    def forward(self, x):
        x = torch.relu(self.dropout(self.affine1(x)))
        return torch.softmax(self.affine2(x), dim=1)


def run_episode(policy, obs_mean, obs_std, steps=20):
    log_probs, rewards = [], []
    for _ in range(steps):
        state = torch.randn(1, 4) * 3 + 1
        state = (state - obs_mean) / obs_std
        dist = Categorical(policy(state))
        action = dist.sample()
        log_probs.append(dist.log_prob(action))
        rewards.append(float(action.item() == int(state[0, 0] > 0)))
    return log_probs, rewards


def finish_episode(optimizer, log_probs, rewards, gamma=0.99, eps=1e-8):
    R, returns = 0.0, []
    for r in reversed(rewards):
        R = r + gamma * R
        returns.insert(0, R)
    returns = torch.tensor(returns)
    returns = (returns - returns.mean()) / (returns.std() + eps)
    policy_loss = []
    for log_prob, ret in zip(log_probs, returns):
        policy_loss.append(-log_prob * ret)
    optimizer.zero_grad()
    loss = torch.cat(policy_loss).sum()
    loss.backward()
    optimizer.step()
    return loss.item()


def main(episodes=50):
    torch.manual_seed(0)
    policy = Policy()
    optimizer = torch.optim.Adam(policy.parameters(), lr=1e-2)
    obs_mean, obs_std = torch.ones(4), 3 * torch.ones(4)
    for episode in range(episodes):
        log_probs, rewards = run_episode(policy, obs_mean, obs_std)
        loss = finish_episode(optimizer, log_probs, rewards)
        print(f"episode {episode} loss {loss:.3f} reward {sum(rewards)}")


if __name__ == "__main__":
    main()
