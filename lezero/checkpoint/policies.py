"""Checkpoint policies: which outputs a checkpointed block keeps instead of recomputing
(JAX's names)."""
from lezero.utils.checks import check_callable

__all__ = ["policies"]


def _save_only(*names):
    """A policy keeping the outputs of the Function classes named (or given)."""
    keep = frozenset(n if isinstance(n, str) else n.__name__ for n in names)
    policy = lambda function: type(function).__name__ in keep    # noqa: E731
    policy.__name__ = f"save_only({', '.join(sorted(keep))})"
    return policy


class policies:
    """Named checkpoint policies (JAX's names)."""
    nothing_saveable = None
    everything_saveable = staticmethod(lambda function: True)
    dots_saveable = staticmethod(_save_only("MatMul", "Linear", "Tensordot", "Einsum"))
    save_only = staticmethod(_save_only)


def check_policy(policy):
    if isinstance(policy, str):
        if policy not in ("nothing_saveable", "everything_saveable", "dots_saveable"):
            raise ValueError(f"checkpoint: policy must be None, a callable or one of "
                             f"'nothing_saveable', 'everything_saveable', 'dots_saveable', "
                             f"got {policy!r}")
        return getattr(policies, policy)
    return check_callable("checkpoint", "policy", policy, allow_none=True)
