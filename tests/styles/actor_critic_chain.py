"""Actor-critic on a generated chain walk (minimalRL style): an episode loop with a `done`
flag, transitions collected in lists and batched with torch.tensor, a target critic for the
TD target, one optimizer over the actor's and the critic's parameters."""

import argparse

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim
from torch.distributions import Categorical

gamma = 0.95
n_rollout = 10


class ChainWalk:
    """Positions 0..size-1; action 1 steps right, 0 left; the right end pays 1 and ends."""

    def __init__(self, size, rng):
        self.size, self.rng = size, rng

    def reset(self):
        self.pos = int(self.rng.integers(0, self.size // 2))
        return self._obs()

    def _obs(self):
        obs = np.zeros(self.size, dtype=np.float32)
        obs[self.pos] = 1.0
        return obs

    def step(self, action):
        self.pos = max(0, self.pos + (1 if action == 1 else -1))
        done = self.pos == self.size - 1
        return self._obs(), (1.0 if done else -0.01), done, {}


class Actor(nn.Module):
    def __init__(self, n_obs):
        super().__init__()
        self.fc1 = nn.Linear(n_obs, 64)
        self.fc_pi = nn.Linear(64, 2)

    def forward(self, x):
        return F.softmax(self.fc_pi(F.relu(self.fc1(x))), dim=-1)


class Critic(nn.Module):
    def __init__(self, n_obs):
        super().__init__()
        self.fc1 = nn.Linear(n_obs, 64)
        self.fc_v = nn.Linear(64, 1)

    def forward(self, x):
        return self.fc_v(F.relu(self.fc1(x)))


def make_batch(data):
    s_lst, a_lst, r_lst, s_prime_lst, done_lst = [], [], [], [], []
    for transition in data:
        s, a, r, s_prime, done = transition
        s_lst.append(s)
        a_lst.append([a])
        r_lst.append([r])
        s_prime_lst.append(s_prime)
        done_lst.append([0.0 if done else 1.0])
    s_batch = torch.tensor(np.array(s_lst), dtype=torch.float)
    s_prime_batch = torch.tensor(np.array(s_prime_lst), dtype=torch.float)
    return s_batch, torch.tensor(a_lst), torch.tensor(r_lst), s_prime_batch, torch.tensor(done_lst)


def train_net(actor, critic, target_critic, optimizer, data):
    s, a, r, s_prime, done = make_batch(data)
    td_target = r + gamma * target_critic(s_prime) * done
    delta = td_target - critic(s)
    pi_a = actor(s).gather(1, a)
    policy_loss = -(torch.log(pi_a) * delta.detach()).mean()
    value_loss = ((critic(s) - td_target.detach()) ** 2).mean()
    loss = policy_loss + 0.5 * value_loss
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    return loss.item()


def main():
    parser = argparse.ArgumentParser(description="actor-critic on a chain walk")
    parser.add_argument("--episodes", type=int, default=60)
    parser.add_argument("--size", type=int, default=8)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    torch.manual_seed(args.seed)
    env = ChainWalk(args.size, np.random.default_rng(args.seed))
    actor, critic = Actor(args.size), Critic(args.size)
    target_critic = Critic(args.size)
    target_critic.load_state_dict(critic.state_dict())
    optimizer = optim.Adam(list(actor.parameters()) + list(critic.parameters()), lr=2e-3)
    score = 0.0
    for n_epi in range(args.episodes):
        s = env.reset()
        done = False
        steps = 0
        while not done and steps < 200:
            data = []
            for t in range(n_rollout):
                prob = actor(torch.from_numpy(s))
                a = Categorical(prob).sample().item()
                s_prime, r, done, info = env.step(a)
                data.append((s, a, r, s_prime, done))
                s = s_prime
                score += r
                steps += 1
                if done:
                    break
            loss = train_net(actor, critic, target_critic, optimizer, data)
        if n_epi % 10 == 0:
            target_critic.load_state_dict(critic.state_dict())
            print(f"episode {n_epi} loss {loss:.4f} score {score / 10:.2f}")
            score = 0.0


if __name__ == "__main__":
    main()
