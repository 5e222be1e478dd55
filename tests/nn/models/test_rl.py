"""DQN and A2C pieces by hand: the replay buffer's ring, TD targets (plain and Double),
target-network updates, returns and GAE advantages, the A2C loss against torch, and the
networks against PyTorch twins."""
import numpy as np
import pytest
import torch

import lezero as lz
from lezero.nn.models import get_model
from lezero.nn.models.a2c import ActorCritic, a2c_loss, discounted_returns, gae
from lezero.nn.models.dqn import (QNetwork, ReplayBuffer, hard_update, linear_epsilon,
                                  q_loss, soft_update, td_target)


def test_replay_buffer_is_a_ring_and_samples_stored_transitions():
    buf = ReplayBuffer(3, obs_dim=2)
    for i in range(5):                              # 0 and 1 are overwritten by 3 and 4
        buf.push([i, -i], i % 2, float(i), [i + 1, 0], i == 4)
    assert len(buf) == 3 and buf.pos == 2
    assert sorted(buf.rewards.tolist()) == [2.0, 3.0, 4.0]
    obs, act, rew, nxt, term = buf.sample(50, np.random.default_rng(0))
    assert set(rew.tolist()) == {2.0, 3.0, 4.0}
    for o, a, r, n, t in zip(obs, act, rew, nxt, term):     # rows stay aligned
        assert o[0] == r and a == int(r) % 2 and n[0] == r + 1 and t == (r == 4)
    with pytest.raises(ValueError, match="ReplayBuffer.sample: the buffer is empty"):
        ReplayBuffer(2, 1).sample(1, np.random.default_rng(0))


def test_td_target_plain_and_double_by_hand():
    rewards = np.array([1.0, 0.5, 2.0])
    terminals = np.array([0.0, 1.0, 0.0])
    q_target = np.array([[1.0, 3.0], [5.0, 4.0], [-1.0, -2.0]])
    # plain: r + 0.9 * (1 - term) * max_a Q_target
    np.testing.assert_allclose(td_target(rewards, q_target, terminals, 0.9),
                               [1 + 0.9 * 3, 0.5, 2 + 0.9 * -1])
    # Double DQN: the online net picks the action, the target net values it
    q_online = np.array([[2.0, 1.0], [0.0, 9.0], [0.0, 1.0]])
    np.testing.assert_allclose(td_target(rewards, q_target, terminals, 0.9, q_online),
                               [1 + 0.9 * 1, 0.5, 2 + 0.9 * -2])


def test_target_network_updates():
    a, b = QNetwork(3, 2, hidden=4), QNetwork(3, 2, hidden=4)
    before = {k: v.copy() for k, v in b.state_dict().items()}
    soft_update(b, a, 0.25)
    for k, v in b.state_dict().items():
        np.testing.assert_allclose(v, 0.25 * a.state_dict()[k] + 0.75 * before[k], rtol=1e-6)
    hard_update(b, a)
    assert all(np.array_equal(v, a.state_dict()[k]) for k, v in b.state_dict().items())
    a.net[0].weight.data += 1                        # a copy, not shared arrays
    assert not np.array_equal(a.net[0].weight.data, b.net[0].weight.data)
    assert linear_epsilon(0) == 1.0 and linear_epsilon(5000) == pytest.approx(0.525)
    assert linear_epsilon(10 ** 6) == 0.05


def test_q_network_and_loss_match_torch():
    torch.manual_seed(0)
    ref = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 8),
                              torch.nn.ReLU(), torch.nn.Linear(8, 2))
    q = get_model("dqn", obs_dim=4, n_actions=2, hidden=8)
    q.net.load_state_dict({k: v.numpy().copy() for k, v in ref.state_dict().items()})
    obs = np.random.default_rng(0).standard_normal((5, 4)).astype(np.float32)
    actions, targets = np.array([0, 1, 1, 0, 1]), np.array([3, -1, 0.2, 9, 0.5], np.float32)
    loss = q_loss(q(obs), actions, targets)
    loss.backward()
    tq = ref(torch.from_numpy(obs))
    tl = torch.nn.functional.smooth_l1_loss(tq[torch.arange(5), torch.from_numpy(actions)],
                                            torch.from_numpy(targets))
    tl.backward()
    assert loss.item() == pytest.approx(tl.item(), rel=1e-5)
    np.testing.assert_allclose(q.net[0].weight.grad.data, ref[0].weight.grad.numpy(),
                               rtol=1e-4, atol=1e-6)
    assert q.act(obs[0], 0.0, np.random.default_rng(0)) == int(tq[0].argmax())


def test_returns_and_gae_by_hand():
    # one environment, three steps, the episode ends after step 1
    rewards = np.array([[1.0], [2.0], [3.0]])
    dones = np.array([[0.0], [1.0], [0.0]])
    g = 0.5
    returns = discounted_returns(rewards, dones, [10.0], g)
    # R2 = 3 + 0.5 * 10 = 8; R1 = 2 (episode over); R0 = 1 + 0.5 * 2 = 2
    np.testing.assert_allclose(returns[:, 0], [2.0, 2.0, 8.0])
    values = np.array([[1.0], [0.5], [4.0]])
    adv, ret = gae(rewards, values, dones, [10.0], g, lam=1.0)
    np.testing.assert_allclose(adv[:, 0], returns[:, 0] - values[:, 0], rtol=1e-6)
    np.testing.assert_allclose(ret, returns, rtol=1e-6)
    adv, _ = gae(rewards, values, dones, [10.0], g, lam=0.5)
    d2 = 3 + 0.5 * 10 - 4                              # deltas
    d1 = 2 - 0.5
    d0 = 1 + 0.5 * 0.5 - 1
    np.testing.assert_allclose(adv[:, 0], [d0 + 0.25 * d1, d1, d2], rtol=1e-6)
    with pytest.raises(ValueError, match=r"gae: rewards and dones must both be \(T, N\)"):
        gae(np.zeros(3), values, dones, [0.0], g, 1.0)


def test_a2c_loss_matches_torch():
    torch.manual_seed(1)
    model = ActorCritic(4, 3, hidden=6)
    obs = np.random.default_rng(2).standard_normal((6, 4)).astype(np.float32)
    actions = np.array([0, 2, 1, 1, 0, 2])
    returns = np.linspace(-1, 2, 6).astype(np.float32)
    adv = np.linspace(1, -1, 6).astype(np.float32)
    logits, values = model(obs)
    loss, parts = a2c_loss(logits, values, actions, returns, adv, 0.5, 0.01)
    loss.backward()
    tl = torch.tensor(logits.data, requires_grad=True)
    tv = torch.tensor(values.data, requires_grad=True)
    logp = tl.log_softmax(1)
    want = (-(logp[torch.arange(6), torch.from_numpy(actions)] * torch.from_numpy(adv)).mean()
            + 0.5 * ((torch.from_numpy(returns) - tv) ** 2).mean()
            - 0.01 * -(logp.exp() * logp).sum(1).mean())
    want.backward()
    assert loss.item() == pytest.approx(want.item(), rel=1e-5)
    assert parts["entropy"] == pytest.approx(-(logp.exp() * logp).sum(1).mean().item(), rel=1e-5)
    # the gradients reaching the heads' outputs agree
    tl2 = lz.Variable(logits.data)
    tv2 = lz.Variable(values.data)
    a2c_loss(tl2, tv2, actions, returns, adv, 0.5, 0.01)[0].backward()
    np.testing.assert_allclose(tl2.grad.data, tl.grad.numpy(), rtol=1e-4, atol=1e-7)
    np.testing.assert_allclose(tv2.grad.data, tv.grad.numpy(), rtol=1e-4, atol=1e-7)


def test_actor_samples_follow_the_policy():
    model = ActorCritic(2, 3, hidden=4)
    model.actor[len(model.actor) - 1].weight.data[:] = 0
    model.actor[len(model.actor) - 1].bias.data[:] = np.log([0.2, 0.3, 0.5])
    counts = np.bincount(model.act(np.zeros((20000, 2)), np.random.default_rng(0)),
                         minlength=3) / 20000
    np.testing.assert_allclose(counts, [0.2, 0.3, 0.5], atol=0.015)
