"""Deep Q-learning (Mnih et al., 2015): a Q-network, an experience replay buffer, the TD
target computed with a target network, and the target network's updates.

The pieces are small and separate so each can be tested and reused:

* ``QNetwork``: an MLP from observations to one value per action;
* ``ReplayBuffer``: a fixed-size ring of transitions, sampled uniformly;
* ``td_target``: ``r + gamma * (1 - terminal) * max_a Q_target(s', a)`` (or Double DQN's
  ``Q_target(s', argmax_a Q_online(s', a))``).  ``terminal`` must be true only when the
  episode really ended: a time-limit truncation still bootstraps;
* ``hard_update`` / ``soft_update``: copy the online weights into the target network,
  at once or by Polyak averaging.
"""
import numpy as np

import lezero.functions as F
from lezero import cuda, nn
from lezero.nn.models.registry import register_model
from lezero.utils.checks import check_array, check_int, check_number

__all__ = ["QNetwork", "ReplayBuffer", "td_target", "hard_update", "soft_update",
           "linear_epsilon", "q_loss", "mlp"]


def mlp(sizes, activation=nn.ReLU):
    """Linear layers of the given sizes with ``activation`` between them."""
    layers = []
    for i, (a, b) in enumerate(zip(sizes, sizes[1:])):
        layers.append(nn.Linear(a, b))
        if i < len(sizes) - 2:
            layers.append(activation())
    return nn.Sequential(*layers)


@register_model("dqn")
class QNetwork(nn.Module):
    """``obs_dim`` -> ``hidden`` (ReLU) x ``layers`` -> ``n_actions`` Q-values."""

    def __init__(self, obs_dim=4, n_actions=2, hidden=128, layers=2):
        super().__init__()
        check_int("QNetwork", "obs_dim", obs_dim, low=1)
        check_int("QNetwork", "n_actions", n_actions, low=1)
        check_int("QNetwork", "hidden", hidden, low=1)
        check_int("QNetwork", "layers", layers, low=1)
        self.n_actions = n_actions
        self.net = mlp([obs_dim] + [hidden] * layers + [n_actions])

    def forward(self, obs):
        return self.net(obs)

    def act(self, obs, epsilon, rng):
        """Epsilon-greedy action for one observation (``rng``: a NumPy Generator)."""
        if rng.random() < epsilon:
            return int(rng.integers(self.n_actions))
        q = self(np.asarray(obs, dtype=np.float32)[None]).data
        return int(cuda.as_numpy(q).argmax())


class ReplayBuffer:
    """The last ``capacity`` transitions ``(obs, action, reward, next_obs, terminal)``;
    ``sample(batch_size, rng)`` draws uniformly with replacement."""

    def __init__(self, capacity, obs_dim):
        self.capacity = check_int("ReplayBuffer", "capacity", capacity, low=1)
        obs_dim = check_int("ReplayBuffer", "obs_dim", obs_dim, low=1)
        self.obs = np.zeros((capacity, obs_dim), dtype=np.float32)
        self.next_obs = np.zeros((capacity, obs_dim), dtype=np.float32)
        self.actions = np.zeros(capacity, dtype=np.int64)
        self.rewards = np.zeros(capacity, dtype=np.float32)
        self.terminals = np.zeros(capacity, dtype=np.float32)
        self.pos, self.size = 0, 0

    def __len__(self):
        return self.size

    def push(self, obs, action, reward, next_obs, terminal):
        """Store one transition, overwriting the oldest once full."""
        i = self.pos
        self.obs[i], self.actions[i], self.rewards[i] = obs, action, reward
        self.next_obs[i], self.terminals[i] = next_obs, float(terminal)
        self.pos = (i + 1) % self.capacity
        self.size = min(self.size + 1, self.capacity)

    def sample(self, batch_size, rng):
        """``batch_size`` stored transitions as arrays ``(obs, actions, rewards,
        next_obs, terminals)``."""
        check_int("ReplayBuffer.sample", "batch_size", batch_size, low=1)
        if self.size == 0:
            raise ValueError("ReplayBuffer.sample: the buffer is empty")
        idx = rng.integers(0, self.size, batch_size)
        return (self.obs[idx], self.actions[idx], self.rewards[idx], self.next_obs[idx],
                self.terminals[idx])


def td_target(rewards, next_q_target, terminals, gamma, next_q_online=None):
    """One-step TD targets (arrays, no gradient): ``r + gamma (1 - terminal) Q'`` with
    ``Q' = max_a next_q_target`` or, given ``next_q_online``, Double DQN's
    ``next_q_target[argmax_a next_q_online]``."""
    gamma = check_number("td_target", "gamma", gamma, low=0, high=1)
    q_next = check_array("td_target", "next_q_target", next_q_target)
    xp = cuda.get_array_module(q_next)
    if next_q_online is None:
        best = q_next.max(axis=1)
    else:
        choice = check_array("td_target", "next_q_online", next_q_online).argmax(axis=1)
        best = q_next[xp.arange(len(choice)), choice]
    return rewards + gamma * (1.0 - terminals) * best


def hard_update(target, source):
    """Copy every parameter and buffer of ``source`` into ``target``."""
    target.load_state_dict({k: v.copy() for k, v in source.state_dict().items()})


def soft_update(target, source, tau):
    """Polyak averaging: ``target = tau * source + (1 - tau) * target``."""
    tau = check_number("soft_update", "tau", tau, low=0, high=1)
    src = source.state_dict()
    target.load_state_dict({k: tau * src[k] + (1 - tau) * v
                            for k, v in target.state_dict().items()})


def linear_epsilon(step, start=1.0, end=0.05, decay_steps=10000):
    """Exploration rate falling linearly from ``start`` to ``end`` over ``decay_steps``."""
    return end + (start - end) * max(0.0, 1.0 - step / decay_steps)


def q_loss(q_values, actions, targets):
    """Huber loss between ``Q(s, a)`` for the taken actions and the TD targets."""
    xp = cuda.get_array_module(q_values.data)
    chosen = q_values[xp.arange(len(actions)), actions]
    return F.smooth_l1_loss(chosen, targets)
