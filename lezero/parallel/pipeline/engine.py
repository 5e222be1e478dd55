"""``Pipeline``: run a model's stages on the ranks of a communicator, micro-batch by
micro-batch, in the order a checked schedule gives.

    pipe = parallel.Pipeline(nn.Sequential(...), comm, micro_batches=8, schedule="1f1b")
    opt = optim.SGD(pipe.parameters(), lr=0.1)          # this rank's stage(s) only
    loss = pipe.step(x, t, F.cross_entropy)             # forward + backward, all micro-batches
    opt.step()

Each rank keeps the stage(s) it owns (virtual stage ``v`` lives on rank ``v % size``) and
runs exactly its ops of ``self.schedule`` -- the Schedule that was checked for deadlock
at construction, and that ``draw`` draws -- in step order:

* ``F`` of stage v: the micro-batch's input (stage 0: a slice of ``inputs``; else the
  activation received from stage v-1), through the stage, sent on to stage v+1; the last
  stage computes ``loss_fn(output, target)``;
* ``B`` of stage v: backward from the loss divided by the number of micro-batches (last
  stage) or from the gradient received from stage v+1, then the input's gradient sent
  back to stage v-1.

Gradients accumulate over the micro-batches, so after ``step`` every parameter holds the
gradient of the mean loss over the whole batch -- the single-process gradient when the
loss is a mean over equal micro-batches.  Then, in this order on every rank: the two ends
of each tied weight (``tied``) have their gradients summed over the ranks that hold them,
the gradients are averaged over ``dp_comm`` (data parallelism across pipelines), and,
with a loss ``scaler``, a non-finite gradient on any rank is made visible on all.
"""
import time

import numpy as np

from lezero import cuda
from lezero.core import Variable, no_grad
from lezero.nn.containers import ModuleDict
from lezero.nn.module import Module
from lezero.parallel import accounting
from lezero.parallel.grads import agree_on_nonfinite, allreduce_gradients
from lezero.parallel.pipeline import transport
from lezero.parallel.pipeline.schedule import make_schedule
from lezero.parallel.pipeline.stages import as_stages
from lezero.utils.checks import check_bool, check_callable, check_int


def pp_comm(comm, where="Pipeline"):
    """``comm``; else the current Grid's pipeline group; else the world."""
    if comm is None:
        from lezero.parallel.grid import current_grid
        grid = current_grid()
        if grid is not None:
            return grid.pp_comm
    from lezero.parallel.world import resolve
    return resolve(comm, where)


def _checkpoint_fn():
    try:
        from lezero.checkpoint import checkpoint
    except ImportError:
        raise ImportError("Pipeline(checkpoint=True) recomputes each stage in backward with "
                          "lz.checkpoint, which this build of LeZero does not have yet "
                          "(lezero.checkpoint)") from None
    return checkpoint


class Pipeline(Module):
    """Pipeline parallelism over ``comm`` (default: the current Grid's pipeline group,
    else the world); see the module docstring.

    ``stages``: an ``nn.Sequential`` (cut into ``size x chunks`` stages; ``balance``
    gives the layer counts) or a list of that many Modules.  ``schedule``: "gpipe",
    "1f1b", "interleaved" (with ``chunks`` model chunks per rank) or a ``Schedule``.
    ``loss_fn(output, target)``: the default loss of ``step``.  ``checkpoint``: recompute
    each stage in backward (``lz.checkpoint``).  ``dp_comm``: average the gradients over
    it after each step.  ``tied``: pairs of parameter names (the stages' own keys, e.g.
    ``("transformer.wte.weight", "lm_head.weight")``) that are one weight held by the
    first and the last stage.
    """

    def __init__(self, stages, comm=None, micro_batches=1, schedule="1f1b", chunks=1,
                 loss_fn=None, balance=None, checkpoint=False, dp_comm=None, tied=None):
        super().__init__()
        where = "Pipeline"
        self.comm = comm = pp_comm(comm, where)
        self.micro_batches = check_int(where, "micro_batches", micro_batches, 1)
        self.chunks = check_int(where, "chunks", chunks, 1)
        self.schedule = make_schedule(schedule, comm.size, self.micro_batches, self.chunks)
        self.n_stages = self.schedule.stages
        transport.check_tags(self.micro_batches, self.n_stages)
        built = as_stages(stages, self.n_stages, balance)
        self.local_stage_ids = [v for v in range(self.n_stages) if v % comm.size == comm.rank]
        self.stages = ModuleDict({str(v): built[v] for v in self.local_stage_ids})
        self.loss_fn = check_callable(where, "loss_fn", loss_fn, allow_none=True)
        self._checkpoint = _checkpoint_fn() if check_bool(where, "checkpoint", checkpoint) \
            else None
        from lezero.parallel.world import resolve
        self.dp_comm = None if dp_comm is None else resolve(dp_comm, where)
        self._tied = self._setup_tied(tied or [])
        self.link = transport.StageLink(comm)
        self.events = []           # (op, start, end) of the last step, perf_counter seconds:
        #                            start is when the op's input had arrived

    # ----- ownership ------------------------------------------------------------------
    def owner(self, stage):
        return stage % self.comm.size

    def holds(self, stage):
        return stage in self.local_stage_ids

    def model_state_dict(self):
        """The local stages' state dicts merged: the whole model's keys for this rank's
        part (what a dense checkpoint of the model holds)."""
        out = {}
        for v in self.local_stage_ids:
            out.update(self.stages[str(v)].state_dict())
        return out

    def named_model_parameters(self):
        seen, out = set(), []
        for v in self.local_stage_ids:
            for name, p in self.stages[str(v)].named_parameters():
                if id(p) not in seen:
                    seen.add(id(p))
                    out.append((name, p))
        return out

    def _setup_tied(self, tied):
        """[(local Parameter, comm of the ranks holding either end)] for each tied pair."""
        first, last = self.owner(0), self.owner(self.n_stages - 1)
        out = []
        for pair in tied:
            if not (isinstance(pair, (tuple, list)) and len(pair) == 2):
                raise ValueError(f"Pipeline: tied must hold (first stage's name, last stage's "
                                 f"name) pairs, got {pair!r}")
            color = 0 if self.comm.rank in (first, last) and first != last else None
            group = self.comm.split(color, name=f"{self.comm.name}/tied")   # collective
            if group is None:
                continue
            params = dict(self.named_model_parameters())
            name = pair[0] if self.comm.rank == first else pair[1]
            if name not in params:
                raise ValueError(f"Pipeline: tied parameter {name!r} is not in the stage(s) "
                                 f"of rank {self.comm.rank}")
            out.append((params[name], group))
        return out

    # ----- running the schedule -------------------------------------------------------
    def _split(self, where, x):
        data = x.data if isinstance(x, Variable) else x
        if data is None or not hasattr(data, "shape") or data.ndim == 0:
            raise TypeError(f"Pipeline.step: {where} must be an array with a batch axis, got "
                            f"{type(x).__name__}")
        m = self.micro_batches
        if data.shape[0] % m:
            raise ValueError(f"Pipeline.step: the batch of {data.shape[0]} {where} does not "
                             f"divide into {m} equal micro-batches")
        n = data.shape[0] // m
        return [data[i * n:(i + 1) * n] for i in range(m)]

    def _xp(self, v):
        for p in self.stages[str(v)].parameters():
            return cuda.get_array_module(p.data)
        return np

    def _call(self, v, x):
        stage = self.stages[str(v)]
        y = self._checkpoint(stage, x) if self._checkpoint is not None else stage(x)
        if not isinstance(y, Variable):
            raise TypeError(f"Pipeline: stage {v} returned {type(y).__name__}; a stage must "
                            "return one Variable (its activation for the next stage)")
        return y

    def _forward_op(self, op, v, run):
        last, V = self.n_stages - 1, self.n_stages
        if v == 0:
            x = run["inputs"][op.micro_batch]
        else:
            arr = self.link.recv(self.owner(v - 1),
                                 transport.tag(op.micro_batch, v - 1, V, transport.ACTIVATION),
                                 self._xp(v))
            x = Variable(arr)
        run["received"] = time.perf_counter()
        with accounting.scope(f"pipeline stage {v}"):
            y = self._call(v, x)
        if v == last:
            loss = run["loss_fn"](y, run["targets"][op.micro_batch])
            run["losses"].append(float(cuda.as_numpy(loss.data)))
            y = loss
        else:
            with accounting.scope(f"pipeline stage {v}"):
                self.link.send(y.data, self.owner(v + 1),
                               transport.tag(op.micro_batch, v, V, transport.ACTIVATION))
        run["held"][(op.micro_batch, v)] = (x, y)

    def _backward_op(self, op, v, run):
        V = self.n_stages
        x, y = run["held"].pop((op.micro_batch, v))
        run["received"] = time.perf_counter()
        if v == V - 1:
            loss = y * (1.0 / self.micro_batches)
            if run["scaler"] is not None:
                loss = run["scaler"].scale(loss)
            loss.backward()
        else:
            g = self.link.recv(self.owner(v + 1),
                               transport.tag(op.micro_batch, v + 1, V, transport.GRADIENT),
                               self._xp(v))
            run["received"] = time.perf_counter()
            y.backward(grad=g)
        if v > 0:
            gx = x.grad.data if x.grad is not None else x.data * 0
            with accounting.scope(f"pipeline stage {v}"):
                self.link.send(gx, self.owner(v - 1),
                               transport.tag(op.micro_batch, v, V, transport.GRADIENT))

    def step(self, inputs, targets=None, loss_fn=None, scaler=None):
        """One training step over ``inputs`` and ``targets`` (the whole batch, cut into
        ``micro_batches``; only the first stage reads ``inputs``, only the last
        ``targets``, but pass both on every rank so that every rank checks them):
        forward, backward, gradient reductions.  Returns the mean loss
        (on every rank of the pipeline; averaged over ``dp_comm`` too)."""
        loss_fn = loss_fn or self.loss_fn
        if loss_fn is None:
            raise ValueError("Pipeline.step: no loss_fn (pass one here or to Pipeline)")
        # Checked on every rank that is given them (not only where they are used), so a
        # bad batch fails on all ranks before any message is sent.
        last = self.n_stages - 1
        run = {"inputs": (self._split("inputs", inputs)
                          if inputs is not None or self.holds(0) else None),
               "targets": (self._split("targets", targets)
                           if targets is not None or self.holds(last) else None),
               "loss_fn": loss_fn, "scaler": scaler, "held": {}, "losses": []}
        self.events = []
        for op in self.schedule.ops_of(self.comm.rank):
            v = self.schedule.stage_of(op)
            (self._forward_op if op.action == "F" else self._backward_op)(op, v, run)
            # an op's time starts when its input has arrived: waiting is bubble
            self.events.append((op, run["received"], time.perf_counter()))
        self.link.flush()
        if scaler is not None and not self.holds(last):
            # This rank's gradients came from the last stage's scaled loss: tell its
            # scaler (public API: scale() notes that this step was scaled).
            scaler.scale(Variable(np.zeros((), np.float32)))
        self._reduce_gradients(scaler)
        return self._mean_loss(run["losses"])

    def _reduce_gradients(self, scaler):
        for param, group in self._tied:
            allreduce_gradients([param], group, op="sum")
        if self.dp_comm is not None:
            allreduce_gradients(self.parameters(), self.dp_comm, op="mean")
        if scaler is not None:
            from lezero.parallel.world import get_world
            agree_on_nonfinite(self.parameters(), get_world())

    def _mean_loss(self, losses):
        value = np.array([np.mean(losses) if losses else 0.0])
        value = self.comm.bcast(value, self.owner(self.n_stages - 1))
        if self.dp_comm is not None:
            value = self.dp_comm.allreduce(value, "mean")
        return float(value[0])

    def forward(self, inputs):
        """Inference: every micro-batch through every stage (no graph); the outputs
        concatenated on the rank of the last stage, None on the others."""
        chunks = self._split("inputs", inputs) if self.holds(0) else None
        V, outputs = self.n_stages, []
        with no_grad():
            for mb in range(self.micro_batches):
                for v in self.local_stage_ids:
                    x = chunks[mb] if v == 0 else Variable(self.link.recv(
                        self.owner(v - 1), transport.tag(mb, v - 1, V, transport.ACTIVATION),
                        self._xp(v)))
                    y = self.stages[str(v)](x)
                    if v == V - 1:
                        outputs.append(y.data)
                    else:
                        self.link.send(y.data, self.owner(v + 1),
                                       transport.tag(mb, v, V, transport.ACTIVATION))
        self.link.flush()
        if not outputs:
            return None
        return Variable(cuda.get_array_module(outputs[0]).concatenate(outputs))

    def measured_timeline(self):
        """Collective over the pipeline's ranks: the last step's ops as they ran, a
        ``SimResult`` (``measured=True``) to draw or to read the bubble from."""
        from lezero.parallel.pipeline.simulate import SimResult
        everyone = self.comm.allgather_object(self.events)
        times = {op: (s, e) for events in everyone for op, s, e in events}
        return SimResult(self.schedule, times, measured=True)

    def extra_repr(self):
        return (f"{self.schedule.name}, {self.micro_batches} micro-batches, stages "
                f"{self.local_stage_ids} of {self.n_stages} on rank {self.comm.rank} of "
                f"{self.comm.size}")
