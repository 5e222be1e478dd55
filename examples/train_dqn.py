"""Train a DQN (Mnih et al., 2015: experience replay, a target network, epsilon-greedy
exploration, Huber loss) on gymnasium's CartPole-v1 and report the average return of
the greedy policy over 20 test episodes (500 is the maximum).

The target network follows the online one by soft updates (``--tau``; the paper's
periodic copies with ``--tau 0``, which learned more slowly here: 276 after 40k steps).

The policy is evaluated every ``--eval-every`` steps on 5 validation episodes and the
best weights are kept (DQN's returns oscillate); the test episodes use other seeds.

    python examples/train_dqn.py                 # a few minutes on one core
    python examples/train_dqn.py --double --steps 60000
"""
import time

import numpy as np

import lezero as lz
from lezero import optim
from lezero.nn.models.dqn import (QNetwork, ReplayBuffer, hard_update, linear_epsilon,
                                  q_loss, soft_update, td_target)

from _rl import BestWeights, finish, make_env, rl_args, rl_parser
from _zoo import progress, train_step


def main():
    p = rl_parser("dqn", __doc__, steps=40000, lr=1e-3)
    p.add_argument("--buffer", type=int, default=50000, help="replay capacity")
    p.add_argument("--gamma", type=float, default=0.99)
    p.add_argument("--tau", type=float, default=0.005,
                   help="soft target update rate per step; 0: copy every --target-every")
    p.add_argument("--target-every", type=int, default=500,
                   help="steps between target copies (with --tau 0, as in the paper)")
    p.add_argument("--hidden", type=int, default=256, help="units of the two hidden layers")
    p.add_argument("--eval-every", type=int, default=5000)
    p.add_argument("--double", action="store_true", help="Double DQN targets")
    args = rl_args(p)
    env = make_env(args.seed)
    rng = np.random.default_rng(args.seed)
    q, target = QNetwork(4, 2, args.hidden), QNetwork(4, 2, args.hidden)
    hard_update(target, q)
    opt = optim.Adam(q.parameters(), lr=args.lr)
    buffer = ReplayBuffer(args.buffer, 4)
    learn_start = 100 if args.smoke else 1000
    greedy = lambda o: q.act(o, 0.0, rng)                       # noqa: E731
    best = BestWeights(q)
    obs, _ = env.reset(seed=args.seed)
    episode_return, recent = 0.0, []
    t0 = time.perf_counter()
    bar = progress(range(args.steps), desc="DQN steps")
    for step in bar:
        with lz.no_grad():
            action = q.act(obs, linear_epsilon(step, decay_steps=args.steps // 4), rng)
        next_obs, reward, terminated, truncated, _ = env.step(action)
        buffer.push(obs, action, reward, next_obs, terminated)   # truncation bootstraps
        obs, episode_return = next_obs, episode_return + reward
        if terminated or truncated:
            recent = (recent + [episode_return])[-20:]
            obs, _ = env.reset()
            episode_return = 0.0
            bar.set_postfix(avg_return=f"{np.mean(recent):.0f}")
        if len(buffer) >= learn_start:
            o, a, r, o2, term = buffer.sample(args.batch_size, rng)
            with lz.no_grad():
                y = td_target(r, target(o2), term, args.gamma, q(o2) if args.double else None)
            loss = q_loss(q(o), a, y)
            train_step(opt, loss, clip=10.0)
        if args.tau > 0:
            soft_update(target, q, args.tau)
        elif (step + 1) % args.target_every == 0:
            hard_update(target, q)
        if (step + 1) % args.eval_every == 0 or step + 1 == args.steps:
            best.validate(greedy, 1000 + step, args.smoke)
    finish(args, "DQN", best, greedy, time.perf_counter() - t0, args.steps)


if __name__ == "__main__":
    main()
