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


def main():
    p = rl_parser("a2c", __doc__, steps=200000, lr=7e-4)
    p.add_argument("--envs", type=int, default=8)
    p.add_argument("--rollout", type=int, default=5, help="steps per environment per update")
    p.add_argument("--gamma", type=float, default=0.99)
    p.add_argument("--gae-lambda", type=float, default=1.0)
    p.add_argument("--entropy", type=float, default=0.01, help="entropy bonus")
    p.add_argument("--eval-every", type=int, default=20000)
    args = rl_args(p)
    envs = [make_env(args.seed + i) for i in range(args.envs)]
    obs = np.stack([e.reset(seed=args.seed + i)[0] for i, e in enumerate(envs)])
    rng = np.random.default_rng(args.seed)
    model = ActorCritic(4, 2)
    opt = optim.Adam(model.parameters(), lr=args.lr)
    greedy = lambda o: int(model.actor(np.asarray(o, np.float32)[None]).data.argmax())  # noqa
    per_update = args.envs * args.rollout
    updates = max(1, args.steps // per_update)
    best, returns_now, recent = BestWeights(model), np.zeros(args.envs), []
    t0 = time.perf_counter()
    bar = progress(range(updates), desc="A2C updates")
    for update in bar:
        batch_obs, actions, rewards, dones = [], [], [], []
        for _ in range(args.rollout):
            with lz.no_grad():
                a = model.act(obs, rng)
            step_rewards, step_dones, next_obs = np.zeros(args.envs), np.zeros(args.envs), []
            for i, env in enumerate(envs):
                o, r, terminated, truncated, _ = env.step(int(a[i]))
                returns_now[i] += r
                if truncated and not terminated:       # bootstrap through the time limit
                    with lz.no_grad():
                        r += args.gamma * float(model(o[None].astype(np.float32))[1].data[0])
                if terminated or truncated:
                    recent = (recent + [returns_now[i]])[-40:]
                    returns_now[i] = 0.0
                    o, _ = env.reset()
                step_rewards[i], step_dones[i] = r, float(terminated or truncated)
                next_obs.append(o)
            batch_obs.append(obs)
            actions.append(a)
            rewards.append(step_rewards)
            dones.append(step_dones)
            obs = np.stack(next_obs).astype(np.float32)
        flat_obs = np.concatenate(batch_obs).astype(np.float32)
        logits, values = model(flat_obs)
        with lz.no_grad():
            last_value = model(obs)[1].data
        adv, ret = gae(np.array(rewards), values.data.reshape(args.rollout, args.envs),
                       np.array(dones), last_value, args.gamma, args.gae_lambda)
        loss, _ = a2c_loss(logits, values, np.concatenate(actions), ret.reshape(-1),
                           adv.reshape(-1), entropy_coef=args.entropy)
        train_step(opt, loss, clip=0.5)
        if recent:
            bar.set_postfix(avg_return=f"{np.mean(recent):.0f}")
        done_steps = (update + 1) * per_update
        if done_steps % args.eval_every < per_update or update + 1 == updates:
            best.validate(greedy, 1000 + update, args.smoke)
    finish(args, "A2C", best, greedy, time.perf_counter() - t0, updates * per_update)


if __name__ == "__main__":
    main()
