"""Reinforcement-learning spellings: REINFORCE with log-probabilities collected over an
episode and one update per episode, and an actor-critic whose two losses share the
trunk's graph (the actor's backward keeps it for the critic's)."""

import torch
import torch.nn as nn
from torch.distributions import Categorical

GAMMA = 0.99
EPISODES = 20


class Policy(nn.Module):
    def __init__(self):
        super().__init__()
        self.trunk = nn.Sequential(nn.Linear(4, 32), nn.Tanh())
        self.actor = nn.Linear(32, 2)
        self.critic = nn.Linear(32, 1)

    def forward(self, state):
        h = self.trunk(state)
        return torch.softmax(self.actor(h), dim=-1), self.critic(h)


def toy_env_step(state, action):
    next_state = state + 0.1 * (action * 2 - 1) * torch.ones(4)
    reward = float(-next_state.abs().sum())
    return next_state, reward, bool(next_state.abs().max() > 1.0)


def discounted(rewards):
    returns, running = [], 0.0
    for r in reversed(rewards):
        running = r + GAMMA * running
        returns.insert(0, running)
    returns = torch.tensor(returns)
    return (returns - returns.mean()) / (returns.std() + 1e-8)


def main():
    torch.manual_seed(0)
    policy = Policy()
    optimizer = torch.optim.Adam(policy.parameters(), lr=1e-2)
    for episode in range(EPISODES):
        state, log_probs, values, rewards = torch.zeros(4), [], [], []
        for t in range(50):
            probs, value = policy(state)
            dist = Categorical(probs)
            action = dist.sample()
            log_probs.append(dist.log_prob(action))
            values.append(value.squeeze())
            state, reward, done = toy_env_step(state, action.item())
            rewards.append(reward)
            if done:
                break
        returns = discounted(rewards)
        advantages = returns - torch.stack(values).detach()
        actor_loss = -(torch.stack(log_probs) * advantages).sum()
        critic_loss = nn.functional.smooth_l1_loss(torch.stack(values), returns)
        optimizer.zero_grad()
        actor_loss.backward(retain_graph=True)
        critic_loss.backward()
        optimizer.step()
        print(f"episode {episode} return {sum(rewards):.2f}")


if __name__ == "__main__":
    main()
