"""The cost model of Parallel I (``_ddp_model.py``) extended to tensor and pipeline
parallelism: one training step of a GPT on a (dp, tp, pp) grid.

Every term is a formula of stated quantities (``Cluster``, ``Model``, ``Plan``):

* **compute**: the step's FLOPs by Narayanan et al. (2021), eq. 3 -- with full activation
  recomputation ``96 B s L h^2 (1 + s / 6h + V / 16 L h)`` (72 instead of 96 without) --
  spread over every GPU at a sustained fraction of its peak;
* **pipeline bubble**: ``(pp - 1) / (v m)`` of the compute (1F1B; ``v`` chunks per rank
  interleaved), ``m = B / (dp b)`` micro-batches of ``b`` sequences;
* **tensor parallelism**: per layer and micro-batch 2 all-reduces forward, 2 backward and
  2 more when the forward is recomputed, of ``b s h`` 2-byte activations each, on the
  critical path; the ring all-reduce of Parallel I, ``2 (t-1) alpha + 2 (t-1)/t n beta``,
  over NVLink while the tensor group fits in a node, else over the network;
* **pipeline messages**: per micro-batch and stage boundary one activation forward and
  one gradient backward (``v`` times as many boundaries when interleaved), over the
  network when neighbouring stages sit on different nodes;
* **data parallelism**: the ring all-reduce of the stage's 2-byte gradients over ``dp``
  ranks; it hides only behind the last micro-batch's backward (with pipelining, or
  gradient accumulation, the earlier ones are done before the last gradient exists);
* **optimizer**: the Adam update reads and writes 16 bytes per parameter at HBM bandwidth.

Memory decides what is feasible: 16 bytes of model state per parameter (bf16 weight and
gradient, fp32 master weight and two Adam moments) over ``tp pp``, plus activations: with
recomputation each layer keeps its 2-byte input per in-flight micro-batch (1F1B: ``pp``
on the first stage), and one layer's full activations, ``s b h (34 + 5 a s / h) / tp``
bytes (Korthikanti et al. 2022), exist during its recomputation.

Efficiency = compute / step time: the fraction of the step the GPUs spend on the model's
arithmetic at their sustained rate -- 1.0 is perfect scaling of one GPU's sustained
throughput, the sense of the design card's 92%.
"""
import math
from dataclasses import dataclass

from _ddp_model import allreduce_time


@dataclass
class Cluster:
    nodes: int = 128
    gpus_per_node: int = 8
    peak_flops: float = 312e12          # A100 bf16 dense
    sustained: float = 0.60             # fraction of peak a large GEMM-heavy step sustains
    memory_bytes: float = 80e9          # A100 80 GB
    hbm_bytes_per_s: float = 1.6e12
    nvlink_bytes_per_s: float = 300e9 * 0.75   # per GPU per direction, 75% achieved
    nvlink_alpha: float = 3e-6
    net_bytes_per_s: float = 25e9 * 0.80       # 8 x 200 Gb/s HDR per node = 25 GB/s per GPU
    net_alpha: float = 5e-6

    @property
    def gpus(self):
        return self.nodes * self.gpus_per_node


@dataclass
class Model:
    layers: int = 96
    hidden: int = 12288
    heads: int = 96
    seq: int = 2048
    vocab: int = 51200                  # 50257 padded to a multiple of 1024 (Megatron)
    batch: int = 1536                   # sequences per step (GPT-3: 3.2 M tokens)

    @property
    def params(self):
        L, h, V = self.layers, self.hidden, self.vocab
        return 12 * L * h * h * (1 + 13 / (12 * h)) + (V + self.seq) * h


@dataclass
class Plan:
    dp: int
    tp: int
    pp: int
    micro: int = 1                      # sequences per micro-batch
    chunks: int = 1                     # interleaved model chunks per rank
    recompute: bool = True


def flops(model, recompute=True):
    """The step's FLOPs (Narayanan et al. 2021, eq. 3)."""
    B, s, L, h, V = model.batch, model.seq, model.layers, model.hidden, model.vocab
    k = 96 if recompute else 72
    return k * B * s * L * h * h * (1 + s / (6 * h) + V / (16 * L * h))


def memory(cluster, model, plan):
    """Bytes per GPU on the first pipeline stage (the fullest)."""
    states = 16 * model.params / (plan.tp * plan.pp)
    layers_here = model.layers / plan.pp
    sbh = model.seq * plan.micro * model.hidden
    in_flight = min(plan.pp, micro_batches(model, plan))
    if plan.chunks > 1:                 # interleaving holds more (Narayanan et al., sec. 2.2)
        in_flight = in_flight * (1 + (plan.pp - 1) / (plan.pp * plan.chunks))
    kept = 2 * sbh * layers_here * in_flight if plan.recompute else \
        sbh * (34 + 5 * model.heads * model.seq / model.hidden) / plan.tp * layers_here * \
        in_flight
    working = sbh * (34 + 5 * model.heads * model.seq / model.hidden) / plan.tp
    return states + kept + working


def micro_batches(model, plan):
    return model.batch // (plan.dp * plan.micro)


def link(cluster, span):
    """(alpha, beta) of a group spanning ``span`` consecutive ranks."""
    if span <= cluster.gpus_per_node:
        return cluster.nvlink_alpha, 1 / cluster.nvlink_bytes_per_s
    return cluster.net_alpha, 1 / cluster.net_bytes_per_s


def step(cluster, model, plan, dp_overlap=1.0):
    """A dict of the step's terms (seconds) and its efficiency for ``plan``."""
    n, m = cluster.gpus, micro_batches(model, plan)
    compute = flops(model, plan.recompute) / (n * cluster.peak_flops * cluster.sustained)
    bubble = (plan.pp - 1) / (plan.chunks * m) * compute
    act = 2 * model.seq * plan.micro * model.hidden
    a, b = link(cluster, plan.tp)
    per_layer = (6 if plan.recompute else 4) * allreduce_time(act, plan.tp, a, b)
    tensor = per_layer * (model.layers / plan.pp) * m
    a, b = link(cluster, plan.tp * plan.dp + 1)     # pipeline neighbours: tp * dp apart
    hops = 2 * m * plan.chunks if plan.pp > 1 else 0
    pipe = hops * (a + act * b)
    a, b = link(cluster, plan.tp * plan.dp if plan.dp > 1 else 1)
    grads = 2 * model.params / (plan.tp * plan.pp)
    data = allreduce_time(grads, plan.dp, a, b)
    window = dp_overlap * (2 / 3) * compute / m    # the last micro-batch's backward
    data_exposed = max(0.0, data - window)
    optimizer = 32 * model.params / (plan.tp * plan.pp) / cluster.hbm_bytes_per_s
    total = compute + bubble + tensor + pipe + data_exposed + optimizer
    return {"compute": compute, "bubble": bubble, "tensor": tensor, "pipeline": pipe,
            "data": data, "data_exposed": data_exposed, "optimizer": optimizer,
            "step": total, "efficiency": compute / total,
            "mfu": flops(model, False) / (n * cluster.peak_flops * total),
            "memory": memory(cluster, model, plan), "micro_batches": m}


def plans(cluster, model):
    """Every (dp, tp, pp, micro, chunks) that divides the cluster and the batch."""
    n = cluster.gpus
    for tp in (1, 2, 4, 8, 16):
        for pp in (d for d in range(1, model.layers + 1) if model.layers % d == 0):
            if n % (tp * pp) or model.heads % tp:
                continue
            dp = n // (tp * pp)
            for micro in (1, 2, 4):
                if model.batch % (dp * micro):
                    continue
                for chunks in (1, 2, 4):
                    m = model.batch // (dp * micro)
                    if chunks > 1 and (pp == 1 or model.layers % (pp * chunks) or m % pp):
                        continue
                    yield Plan(dp, tp, pp, micro, chunks)


def search(cluster, model, memory_fraction=0.9, dp_overlap=1.0):
    """(feasible plans sorted by step time, how many were refused for memory)."""
    feasible, refused = [], 0
    for plan in plans(cluster, model):
        s = step(cluster, model, plan, dp_overlap)
        if s["memory"] > memory_fraction * cluster.memory_bytes:
            refused += 1
            continue
        feasible.append((plan, s))
    feasible.sort(key=lambda ps: ps[1]["step"])
    return feasible, refused


def describe(plan):
    text = f"dp={plan.dp} tp={plan.tp} pp={plan.pp} b={plan.micro}"
    return text + (f" v={plan.chunks}" if plan.chunks > 1 else "")


def fmt_time(seconds):
    return f"{seconds:.2f} s" if seconds >= 1 else f"{seconds * 1e3:.0f} ms"


def best_of(feasible, **fixed):
    for plan, s in feasible:
        if all(getattr(plan, k) == v for k, v in fixed.items()):
            return plan, s
    return None


def tokens_per_s(model, s):
    return model.batch * model.seq / s["step"]


def days(model, s, tokens=300e9):
    """Days to train on ``tokens`` (GPT-3: 300 B)."""
    return tokens / tokens_per_s(model, s) / 86400


assert math.isclose(Model().params / 1e9, 174.6, rel_tol=0.01)     # GPT-3's 175 B
