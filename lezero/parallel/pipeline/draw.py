"""Draw a pipeline timeline: as text, and as a matplotlib picture.

Both take a ``SimResult`` -- simulated (``Schedule.simulate``) or measured
(``Pipeline.measured_timeline``) -- so a schedule, its simulation and a real run are
drawn the same way.  In the text form each column is one time quantum (one step of a
unit-time schedule); an op fills the columns it covers with its label ("F3", "B3", or
"F3b" for chunk 1 of an interleaved schedule); ``.`` is idle (the bubble).
"""
import io


def timeline_text(result, quantum=None, max_columns=200):
    """The timeline as lines of text, one row per rank, with its summary on top."""
    s = result.schedule
    durations = [e - b for b, e in result.times.values() if e > b]
    q = quantum or (min(durations) if durations else 1.0)
    columns = min(max_columns, int(round(result.makespan / q)) if q else 0)
    labels = {o: o.label(s.chunks) for o in result.times}
    width = max(len(t) for t in labels.values()) + 1
    lines = [result.summary()]
    if result.measured or quantum is not None:
        lines.append(f"(one column = {_duration(q) if result.measured else format(q, 'g')})")
    axis = "".join(f"{i:<{width}d}" if i % 5 == 0 else " " * width for i in range(columns))
    lines.append(f"{'step' if not result.measured and q == 1 else 'column':>7} |"
                 + axis.rstrip())
    for r in range(s.ranks):
        cells = ["." + " " * (width - 1)] * columns
        for o in s.ops_of(r):
            b, e = result.times[o]
            first, last = int(round(b / q)), max(int(round(e / q)), int(round(b / q)) + 1)
            for c in range(first, min(last, columns)):
                cells[c] = f"{labels[o]:<{width}}"
        lines.append(f"rank {r:>2} |" + "".join(cells).rstrip())
    return "\n".join(lines)


def _duration(seconds):
    if seconds >= 1:
        return f"{seconds:.3g} s"
    return f"{seconds * 1e3:.3g} ms" if seconds >= 1e-3 else f"{seconds * 1e6:.3g} us"


_COLORS = {"F": ("#4C72B0", "#8FB0E0", "#2A4A80", "#B8CCEE"),
           "B": ("#DD8452", "#F2B48C", "#A0522D", "#F7CFAF")}


def plot_timeline(result, path=None, ax=None, title=None):
    """Boxes per rank over time, coloured by action (and chunk), labelled by micro-batch.
    Saves to ``path`` (atomically, format from the extension) when given; returns the
    figure."""
    from matplotlib.figure import Figure
    s = result.schedule
    fig = None
    if ax is None:
        fig = Figure(figsize=(max(6.0, min(16.0, 0.35 * len(s.ops) / max(s.ranks, 1) + 3)),
                              0.6 * s.ranks + 1.4))
        ax = fig.add_subplot(1, 1, 1)
    for o, (b, e) in result.times.items():
        color = _COLORS[o.action][o.chunk % 4]
        ax.broken_barh([(b, e - b)], (o.rank - 0.4, 0.8), facecolors=color,
                       edgecolors="white", linewidth=0.5)
        if e - b > 0.015 * result.makespan:
            ax.text((b + e) / 2, o.rank, str(o.micro_batch), ha="center", va="center",
                    fontsize=7, color="white" if o.chunk % 2 == 0 else "black")
    from matplotlib.patches import Patch
    handles = [Patch(color=_COLORS[a][c % 4], label=f"{name}" + (f" chunk {c}"
                                                                  if s.chunks > 1 else ""))
               for a, name in (("F", "forward"), ("B", "backward")) for c in range(s.chunks)]
    ax.legend(handles=handles, fontsize=6, loc="upper right", ncol=2 * s.chunks)
    ax.set_yticks(range(s.ranks))
    ax.set_yticklabels([f"rank {r}" for r in range(s.ranks)])
    ax.invert_yaxis()
    ax.set_xlim(0, result.makespan)
    ax.set_xlabel("time (s)" if result.measured else "time (forward = 1)")
    ax.set_title(title or result.summary(), fontsize=8)
    fig = fig or ax.figure
    if path is not None:
        save_figure(fig, path)
    return fig


def save_figure(fig, path, dpi=120):
    """Write a matplotlib figure through ``atomic_write`` (format from the extension)."""
    import os

    from lezero.utils.files import atomic_write
    buf = io.BytesIO()
    ext = os.path.splitext(str(path))[1].lstrip(".") or "png"
    fig.savefig(buf, format=ext, dpi=dpi, bbox_inches="tight")
    return atomic_write(path, buf.getvalue(), where="plot_timeline")
