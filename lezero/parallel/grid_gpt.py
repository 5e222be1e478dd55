"""``GridGPT``: GPT-mini on a ``Grid(dp, tp, pp)`` -- all three parallelisms at once.

    grid = parallel.Grid(2, 2, 2)                       # mpiexec -n 8
    gpt = parallel.GridGPT(GPTConfig(...), grid, micro_batches=4)
    opt = optim.AdamW(gpt.parameters(), lr=3e-4)        # this rank's shard of its stage(s)
    for idx, targets in batches:                        # the global batch, on every rank
        opt.zero_grad(); loss = gpt.step(idx, targets); opt.step()

* tensor: the model is a ``ParallelGPT`` over ``grid.tp_comm``;
* pipeline: ``pipeline_stages`` cuts it into ``pp x chunks`` stages run by a
  ``Pipeline`` over ``grid.pp_comm`` (the tied embedding/head weight, held by the first
  and the last stage, has its gradient summed between them);
* data: each data-parallel rank takes its ``1/dp`` of the global batch; the Pipeline
  averages the gradients over ``grid.dp_comm`` after the last micro-batch.

``step`` returns the mean loss over the global batch (on every rank), so a run on any
grid prints the loss curve of one process with the whole batch.
"""
from lezero.nn.module import Module
from lezero.parallel.pipeline.engine import Pipeline
from lezero.parallel.tensor.gpt import ParallelGPT
from lezero.parallel.tensor.state import dense_state_dict, load_dense_state_dict


class GridGPT(Module):
    """GPT-mini with data x tensor x pipeline parallelism over ``grid``."""

    def __init__(self, config, grid, micro_batches=1, schedule="1f1b", chunks=1):
        super().__init__()
        from lezero.parallel.grid import Grid
        if not isinstance(grid, Grid):
            raise TypeError(f"GridGPT: grid must be a parallel.Grid, got {type(grid).__name__}")
        self.grid = grid
        model = ParallelGPT(config, comm=grid.tp_comm)
        self.config = model.config
        stages = model.pipeline_stages(grid.pp * chunks)
        self.pipe = Pipeline(stages, grid.pp_comm, micro_batches, schedule, chunks,
                             loss_fn=stages[-1].loss_fn, dp_comm=grid.dp_comm,
                             tied=model.tied_names())

    def local_batch(self, x):
        """This data-parallel rank's rows of the global batch ``x``."""
        n, dp = x.shape[0], self.grid.dp
        if n % dp:
            raise ValueError(f"GridGPT: a global batch of {n} does not divide over dp={dp}")
        d = self.grid.coord.dp
        return x[d * (n // dp):(d + 1) * (n // dp)]

    def step(self, idx, targets, scaler=None):
        """Forward and backward of the global batch; returns its mean loss."""
        return self.pipe.step(self.local_batch(idx), self.local_batch(targets),
                              scaler=scaler)

    def load_dense_state_dict(self, state):
        """Load a dense GPT state dict (LeZero's or nanoGPT's keys) into this rank's part."""
        return load_dense_state_dict(self.pipe, state)

    def dense_state_dict(self):
        """This rank's stages as dense arrays (collective over the tensor group); the
        pipeline's other stages are on other ranks."""
        return dense_state_dict(self.pipe)

    def named_model_parameters(self):
        return self.pipe.named_model_parameters()
