"""What the KV cache saves: the cost of producing one token at a given context length,
with the cache (one new token attends over the cached keys and values) and without
(the whole context runs through the model again), for LeZero's GPT-2 and LLaMA.

    BENCH_THREADS=1 BENCH_CLOCK=cpu python benchmarks/plot_kv_cache.py [OUT.png]

Prints the table and draws it (default ``docs/figures/kv_cache.png``).  Models: hidden
128, 4 layers, 4 heads (LLaMA: 2 key/value heads), vocabulary 512, random weights.
"""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import interleaved_best, limit_threads, set_threads  # noqa: E402
from _record import run_main  # noqa: E402

LENGTHS = (16, 64, 128, 256, 384)
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def build(name):
    import lezero as lz
    from lezero.nn import models
    lz.manual_seed(0)
    if name == "gpt2":
        return models.get_model("gpt2", vocab_size=512, n_embd=128, n_layer=4, n_head=4,
                                n_positions=512).eval()
    return models.get_model("llama", vocab_size=512, hidden_size=128, num_hidden_layers=4,
                            num_attention_heads=4, num_key_value_heads=2,
                            intermediate_size=344).eval()


def per_token_seconds(model, length):
    """(cached step, full forward) seconds to get the next token's logits at ``length``."""
    import lezero as lz
    from lezero.nn.models import KVCache
    ids = np.random.default_rng(0).integers(0, 512, (1, length))

    def cached():
        cache = KVCache()
        cache.layers = list(prefilled.layers)        # the same past every round
        model(ids[:, -1:], past_key_values=cache)

    with lz.no_grad():
        prefilled = KVCache()
        model(ids[:, :-1], past_key_values=prefilled)
        return interleaved_best([cached, lambda: model(ids)], rounds=5, warmup=1)


def main(out):
    threads = set_threads()
    import lezero as lz
    rows = {}
    with limit_threads(threads), lz.no_grad():
        for name in ("gpt2", "llama"):
            model = build(name)
            rows[name] = [per_token_seconds(model, n) for n in LENGTHS]
    print(f"ms per generated token ({threads} thread(s), clock "
          f"{os.environ.get('BENCH_CLOCK', 'wall')})")
    print(f"{'context':>8}" + "".join(f"{n + ' cached':>16}{n + ' full':>14}"
                                      for n in rows))
    for i, length in enumerate(LENGTHS):
        print(f"{length:>8}" + "".join(f"{rows[n][i][0] * 1e3:>16.2f}"
                                       f"{rows[n][i][1] * 1e3:>14.2f}" for n in rows))
    plot(rows, out)


def plot(rows, out):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from lezero.utils.files import atomic_write
    fig, ax = plt.subplots(figsize=(6, 3.6))
    for name, style in (("gpt2", "-"), ("llama", "--")):
        times = np.array(rows[name]) * 1e3
        ax.plot(LENGTHS, times[:, 1], "o" + style, color="tab:red", label=f"{name}, no cache")
        ax.plot(LENGTHS, times[:, 0], "s" + style, color="tab:blue", label=f"{name}, KV cache")
    ax.set_xlabel("context length (tokens)")
    ax.set_ylabel("ms per new token")
    ax.set_title("Cost of one generated token (LeZero, CPU)", fontsize=10)
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
    atomic_write(out, lambda f: fig.savefig(f, format="png", dpi=100))
    print(f"wrote {os.path.relpath(out, ROOT)}")


if __name__ == "__main__":
    run_main(lambda: main(sys.argv[1] if len(sys.argv) > 1 else os.path.join(
        ROOT, "docs", "figures", "kv_cache.png")))
