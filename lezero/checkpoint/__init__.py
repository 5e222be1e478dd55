"""Gradient checkpointing: trade compute for memory by recomputing a block in backward.

    y = lz.checkpoint(block, x)            # or: block = lz.checkpoint(block); y = block(x)
    net = lz.checkpoint_sequential(layers, segments="sqrt")   # a callable

How it works, on LeZero's own engine (no nested "reentrant" backward, hooks intact):

1. **Forward** runs the block once under ``no_grad`` (nothing is recorded, so nothing it
   computes is kept), with a FunctionHook that notes every Variable from *outside* the
   block that needs a gradient: the inputs, but also the parameters it touches and any
   captured Variable.  One ``Checkpoint`` Function is recorded whose inputs are exactly
   those Variables and whose outputs are the block's outputs.  The graph therefore holds
   only the block's inputs.
2. **Backward** of that node re-runs the block with recording on: the process generator
   (dropout masks), ``Config.train``/``use_numba``, and hooks that mark themselves
   replayable (autocast) are restored; every outside Variable entering a Function is
   swapped for a leaf stand-in sharing its data; module buffers (BatchNorm running
   statistics) are restored afterwards, so they are updated once.  ``lz.grad`` of the
   recomputed outputs with respect to the stand-ins gives the node's input gradients,
   which the outer engine accumulates: a parameter's hooks and post-accumulate hooks run
   once, after its full gradient is known, even if it is also used outside the block.
3. With ``create_graph`` the stand-ins are relinked to the real inputs afterwards, so
   the returned gradients are differentiable again (double backward works).

``policy`` keeps chosen outputs instead of recomputing them (JAX's checkpoint policies):
``policy=policies.dots_saveable`` keeps matmul/linear/tensordot/einsum results; the
recomputation then reuses them.  Any ``callable(function) -> bool`` works; it must only
select Functions whose forward does not depend on whether gradients are needed.
"""
from lezero.checkpoint.api import checkpoint, checkpoint_sequential
from lezero.checkpoint.node import Checkpoint
from lezero.checkpoint.policies import policies

__all__ = ["checkpoint", "checkpoint_sequential", "policies", "Checkpoint"]
