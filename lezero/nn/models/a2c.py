"""Advantage actor-critic (A2C, the synchronous form of Mnih et al.'s 2016 A3C).

``ActorCritic`` maps observations to action logits (the policy) and a state value (the
critic), with separate MLPs.  After a rollout of ``T`` steps in ``N`` environments:

* ``discounted_returns``: ``R_t = r_t + gamma (1 - done_t) R_{t+1}``, seeded with the
  critic's value of the state after the rollout (n-step bootstrapped returns);
* ``gae``: generalised advantage estimation (Schulman et al., 2016),
  ``delta_t = r_t + gamma (1 - done_t) V_{t+1} - V_t``,
  ``A_t = delta_t + gamma lambda (1 - done_t) A_{t+1}``; ``lambda = 1`` gives
  ``R_t - V_t`` with the returns above;
* ``a2c_loss``: ``-mean(log pi(a|s) A) + value_coef mean((R - V)^2) - entropy_coef H``.

``done_t`` marks the end of an episode after step ``t`` (terminated or truncated); when a
time limit truncates an episode, add ``gamma * V(final observation)`` to that step's
reward so the cut still bootstraps (the example does).
"""
import numpy as np

import lezero.functions as F
from lezero import cuda, nn
from lezero.nn.models.dqn import mlp
from lezero.nn.models.registry import register_model
from lezero.utils.checks import check_int, check_number

__all__ = ["ActorCritic", "discounted_returns", "gae", "a2c_loss"]


@register_model("a2c")
class ActorCritic(nn.Module):
    """``actor``: obs -> hidden (tanh) x 2 -> action logits; ``critic``: obs -> hidden
    (tanh) x 2 -> value.  ``forward(obs)`` returns ``(logits, values (N,))``."""

    def __init__(self, obs_dim=4, n_actions=2, hidden=64):
        super().__init__()
        check_int("ActorCritic", "obs_dim", obs_dim, low=1)
        self.n_actions = check_int("ActorCritic", "n_actions", n_actions, low=1)
        check_int("ActorCritic", "hidden", hidden, low=1)
        self.actor = mlp([obs_dim, hidden, hidden, n_actions], nn.Tanh)
        self.critic = mlp([obs_dim, hidden, hidden, 1], nn.Tanh)

    def forward(self, obs):
        return self.actor(obs), self.critic(obs).reshape(-1)

    def act(self, obs, rng):
        """Sample one action per row of ``obs`` from the policy (no graph needed)."""
        logits = cuda.as_numpy(self.actor(np.asarray(obs, dtype=np.float32)).data)
        p = np.exp(logits - logits.max(axis=1, keepdims=True))
        p /= p.sum(axis=1, keepdims=True)
        u = rng.random((len(p), 1))
        return np.minimum((p.cumsum(axis=1) < u).sum(axis=1), self.n_actions - 1)


def _check_rollout(where, rewards, dones):
    rewards, dones = np.asarray(rewards, dtype=np.float64), np.asarray(dones, dtype=np.float64)
    if rewards.shape != dones.shape or rewards.ndim != 2:
        raise ValueError(f"{where}: rewards and dones must both be (T, N), got "
                         f"{rewards.shape} and {dones.shape}")
    return rewards, dones


def discounted_returns(rewards, dones, last_value, gamma):
    """Bootstrapped returns (T, N) of a rollout; ``last_value`` (N,) is V(s_T)."""
    rewards, dones = _check_rollout("discounted_returns", rewards, dones)
    gamma = check_number("discounted_returns", "gamma", gamma, low=0, high=1)
    out = np.zeros_like(rewards)
    running = np.asarray(last_value, dtype=np.float64)
    for t in range(len(rewards) - 1, -1, -1):
        running = rewards[t] + gamma * (1 - dones[t]) * running
        out[t] = running
    return out.astype(np.float32)


def gae(rewards, values, dones, last_value, gamma, lam):
    """``(advantages, returns)`` (T, N) by generalised advantage estimation;
    ``values`` (T, N) are V(s_t), ``returns = advantages + values``."""
    rewards, dones = _check_rollout("gae", rewards, dones)
    gamma = check_number("gae", "gamma", gamma, low=0, high=1)
    lam = check_number("gae", "lam", lam, low=0, high=1)
    values = np.asarray(values, dtype=np.float64)
    next_values = np.concatenate([values[1:], np.asarray(last_value, np.float64)[None]])
    adv = np.zeros_like(rewards)
    running = np.zeros(rewards.shape[1])
    for t in range(len(rewards) - 1, -1, -1):
        delta = rewards[t] + gamma * (1 - dones[t]) * next_values[t] - values[t]
        running = delta + gamma * lam * (1 - dones[t]) * running
        adv[t] = running
    return adv.astype(np.float32), (adv + values).astype(np.float32)


def a2c_loss(logits, values, actions, returns, advantages, value_coef=0.5,
             entropy_coef=0.01):
    """The actor-critic loss over a flattened rollout and its parts (floats):
    ``(loss, {"policy", "value", "entropy"})``."""
    xp = cuda.get_array_module(logits.data)
    log_p = F.log_softmax(logits, axis=1)
    chosen = log_p[xp.arange(len(actions)), xp.asarray(actions)]
    policy = -F.mean(chosen * xp.asarray(advantages))
    value = F.mse_loss(values, xp.asarray(returns))
    entropy = -F.mean(F.sum(F.exp(log_p) * log_p, axis=1))
    loss = policy + value_coef * value - entropy_coef * entropy
    return loss, {"policy": policy.item(), "value": value.item(), "entropy": entropy.item()}
