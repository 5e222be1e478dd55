"""CartPole helpers shared by train_dqn.py and train_a2c.py: the environment, greedy
evaluation over seeded episodes, and the flags of an RL run (steps, not epochs)."""
import os

import numpy as np

import lezero as lz

from _common import check_args, make_parser, require, write_summary

require("gymnasium")                  # the examples extra, before any work

ENV = "CartPole-v1"


def make_env(seed):
    import gymnasium as gym
    env = gym.make(ENV)
    env.reset(seed=seed)
    env.action_space.seed(seed)
    return env


def evaluate(policy, episodes, seed, max_steps=None):
    """Mean and list of returns of ``policy(obs) -> action`` over ``episodes`` episodes
    seeded ``seed, seed + 1, ...`` (CartPole-v1 caps an episode at 500)."""
    env = make_env(seed)
    returns = []
    for i in range(episodes):
        obs, _ = env.reset(seed=seed + i)
        total, done, steps = 0.0, False, 0
        while not done:
            with lz.no_grad():
                obs, reward, terminated, truncated, _ = env.step(policy(obs))
            total += reward
            steps += 1
            done = terminated or truncated or (max_steps is not None and steps >= max_steps)
        returns.append(total)
    env.close()
    return float(np.mean(returns)), returns


def rl_parser(name, description, steps, lr):
    p = make_parser(name, description, epochs=1, batch_size=64, lr=lr)
    p.add_argument("--steps", type=int, default=steps, help="environment steps to train")
    p.add_argument("--eval-episodes", type=int, default=20,
                   help="greedy test episodes at the end (seeds 10000, 10001, ...)")
    return p


def rl_args(parser):
    args = check_args(parser, parser.parse_args())
    if args.resume or args.stop_after:
        parser.error("--resume/--stop-after: an RL run keeps no checkpoint (a few minutes)")
    if args.smoke:
        args.steps, args.eval_episodes = 300, 2
    os.makedirs(args.out, exist_ok=True)
    lz.manual_seed(args.seed)
    return args


class BestWeights:
    """The weights that scored best on the validation episodes so far."""

    def __init__(self, model):
        self.model, self.score, self.state = model, -1.0, None

    def validate(self, policy, seed, smoke):
        """Score ``policy`` on 5 validation episodes; keep the weights if best."""
        score, _ = evaluate(policy, 5, seed, max_steps=50 if smoke else None)
        if score >= self.score:
            self.score = score
            self.state = {k: v.copy() for k, v in self.model.state_dict().items()}


def finish(args, name, best, policy, seconds, env_steps):
    """Restore the best weights, save them, test them on ``args.eval_episodes`` fresh
    episodes, print the average return and write the summary."""
    best.model.load_state_dict(best.state)
    best.model.save(os.path.join(args.out, "model.npz"))
    mean_return, returns = evaluate(policy, args.eval_episodes, 10000,
                                    max_steps=50 if args.smoke else None)
    print(f"{name} on {ENV} after {env_steps} steps ({seconds:.0f} s): average return "
          f"{mean_return:.1f} over {len(returns)} greedy test episodes (min "
          f"{min(returns):.0f}, max {max(returns):.0f}; best validation {best.score:.0f})")
    write_summary(args, name.lower(), "reinforcement learning", f"gymnasium {ENV}",
                  "avg_return", mean_return, seconds, env_steps=env_steps,
                  parameters=best.model.num_parameters())
