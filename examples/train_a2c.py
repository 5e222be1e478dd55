"""Train an advantage actor-critic (A2C: synchronous A3C, Mnih et al., 2016) on
gymnasium's CartPole-v1 with 8 environments and 5-step rollouts, and report the average
return of the greedy policy over 20 test episodes (500 is the maximum).

Advantages are n-step bootstrapped returns minus the critic's values (``--gae-lambda``
below 1 uses GAE); time-limit truncations bootstrap from the critic.  The policy is
validated every ``--eval-every`` steps and the best weights are kept.

    python examples/train_a2c.py                 # a few minutes on one core
    python examples/train_a2c.py --gae-lambda 0.95 --steps 300000
"""
import time

import numpy as np

import lezero as lz
from lezero import optim
from lezero.nn.models.a2c import ActorCritic, a2c_loss, gae

from _rl import BestWeights, finish, make_env, rl_args, rl_parser
from _zoo import progress, train_step


class Rollouts:
    """``n`` CartPole environments stepped together; ``collect`` runs ``length`` steps of
    the current policy in each and returns (observations, actions, rewards, dones), each
    (length, n, ...); ``recent`` holds the returns of the last 40 finished episodes."""

    def __init__(self, n, seed, gamma):
        self.envs = [make_env(seed + i) for i in range(n)]
        self.obs = np.stack([e.reset(seed=seed + i)[0] for i, e in enumerate(self.envs)])
        self.gamma, self.running, self.recent = gamma, np.zeros(n), []

    def _step(self, model, i, action):
        o, r, terminated, truncated, _ = self.envs[i].step(action)
        self.running[i] += r
        if truncated and not terminated:       # bootstrap through the time limit
            with lz.no_grad():
                r += self.gamma * float(model(o[None].astype(np.float32))[1].data[0])
        if terminated or truncated:
            self.recent = (self.recent + [self.running[i]])[-40:]
            self.running[i] = 0.0
            o, _ = self.envs[i].reset()
        return o, r, float(terminated or truncated)

    def collect(self, model, length, rng):
        batch_obs, actions, rewards, dones = [], [], [], []
        for _ in range(length):
            with lz.no_grad():
                a = model.act(self.obs, rng)
            steps = [self._step(model, i, int(a[i])) for i in range(len(self.envs))]
            batch_obs.append(self.obs)
            actions.append(a)
            rewards.append([r for _, r, _ in steps])
            dones.append([d for _, _, d in steps])
            self.obs = np.stack([o for o, _, _ in steps]).astype(np.float32)
        return np.array(batch_obs), np.array(actions), np.array(rewards), np.array(dones)


def main():
    p = rl_parser("a2c", __doc__, steps=200000, lr=7e-4)
    p.add_argument("--envs", type=int, default=8)
    p.add_argument("--rollout", type=int, default=5, help="steps per environment per update")
    p.add_argument("--gamma", type=float, default=0.99)
    p.add_argument("--gae-lambda", type=float, default=1.0)
    p.add_argument("--entropy", type=float, default=0.01, help="entropy bonus")
    p.add_argument("--eval-every", type=int, default=20000)
    args = rl_args(p)
    rollouts = Rollouts(args.envs, args.seed, args.gamma)
    rng = np.random.default_rng(args.seed)
    model = ActorCritic(4, 2)
    opt = optim.Adam(model.parameters(), lr=args.lr)
    greedy = lambda o: int(model.actor(np.asarray(o, np.float32)[None]).data.argmax())  # noqa
    per_update = args.envs * args.rollout
    updates = max(1, args.steps // per_update)
    best = BestWeights(model)
    t0 = time.perf_counter()
    bar = progress(range(updates), desc="A2C updates")
    for update in bar:
        batch_obs, actions, rewards, dones = rollouts.collect(model, args.rollout, rng)
        logits, values = model(batch_obs.reshape(per_update, -1).astype(np.float32))
        with lz.no_grad():
            last_value = model(rollouts.obs)[1].data
        adv, ret = gae(rewards, values.data.reshape(args.rollout, args.envs), dones,
                       last_value, args.gamma, args.gae_lambda)
        loss, _ = a2c_loss(logits, values, actions.reshape(-1), ret.reshape(-1),
                           adv.reshape(-1), entropy_coef=args.entropy)
        train_step(opt, loss, clip=0.5)
        if rollouts.recent:
            bar.set_postfix(avg_return=f"{np.mean(rollouts.recent):.0f}")
        done_steps = (update + 1) * per_update
        if done_steps % args.eval_every < per_update or update + 1 == updates:
            best.validate(greedy, 1000 + update, args.smoke)
    finish(args, "A2C", best, greedy, time.perf_counter() - t0, updates * per_update)


if __name__ == "__main__":
    main()
