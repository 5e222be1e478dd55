"""``plot_history``: loss and metric curves of a training run, as a PNG.

A training history is what a loop records per epoch: a list of dicts
(``[{"loss": 0.9, "test_acc": 0.81}, ...]``, what ``examples/_common.fit`` returns and
writes to ``history.json``) or a dict of lists (``{"train_loss": [...], ...}``, what
``lezero.demo`` keeps).  Matplotlib is imported only when a plot is drawn; the figure is a bare
``matplotlib.figure.Figure`` (no pyplot, so no window opens and a notebook's backend is
left alone), and the file is written atomically.
"""
import math
import numbers

__all__ = ["plot_history", "history_series"]

# bookkeeping entries of a history, not curves
_SKIP = ("seconds", "epoch", "lr_step")


def history_series(history):
    """``{metric: [value per epoch]}`` from a list of per-epoch dicts or a dict of lists;
    non-numeric entries and ``seconds``/``epoch`` are left out, a missing value is NaN."""
    if isinstance(history, dict):
        columns = {k: list(v) for k, v in history.items()}
    elif isinstance(history, (list, tuple)) and all(isinstance(h, dict) for h in history):
        keys = list(dict.fromkeys(k for h in history for k in h))
        columns = {k: [h.get(k, math.nan) for h in history] for k in keys}
    else:
        raise TypeError("plot_history: history must be a list of per-epoch dicts or a dict "
                        f"of lists, got {type(history).__name__}")
    series = {}
    for key, values in columns.items():
        if key in _SKIP or not values:
            continue
        if all(isinstance(v, numbers.Real) and not isinstance(v, bool) for v in values):
            series[key] = [float(v) for v in values]
    if not series:
        raise ValueError("plot_history: the history holds no numeric metric to plot "
                         f"(keys: {sorted(columns)})")
    return series


def _group(key):
    """Curves sharing an axis: losses with losses, accuracies with accuracies."""
    name = key.lower()
    if "acc" in name:
        return "accuracy"
    if "loss" in name or "ppl" in name or "elbo" in name:
        return "loss"
    return key


def plot_history(history, path=None, title=None):
    """Draw one panel per kind of metric (losses together, accuracies together, every
    other metric alone) against the epoch, and return the matplotlib Figure.

    ``path``: where to write the PNG (atomically); None only returns the figure.  The
    plotted values are exactly the history's (``fig.axes[i].lines[j].get_ydata()``).
    """
    from lezero.utils.files import atomic_write
    from matplotlib.figure import Figure     # no pyplot: no window, no global backend
    from matplotlib.ticker import MaxNLocator

    series = history_series(history)
    groups = {}
    for key, values in series.items():
        groups.setdefault(_group(key), []).append((key, values))
    fig = Figure(figsize=(4.2 * len(groups), 3.2))
    for i, (group, curves) in enumerate(groups.items()):
        ax = fig.add_subplot(1, len(groups), i + 1)
        for key, values in curves:
            ax.plot(range(1, len(values) + 1), values, marker="o", ms=3, label=key)
        ax.set(xlabel="epoch", title=group)
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.legend(fontsize=8)
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    if path is not None:
        atomic_write(path, lambda f: fig.savefig(f, format="png", dpi=100),
                     where="plot_history")
    return fig
