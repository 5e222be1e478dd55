"""Progress for long loops: ``progress`` (tqdm where it is installed, a plain counter
otherwise) and ``EpochProgress`` (a bar on a terminal, a plain line per epoch in a log)."""
import sys
import time

__all__ = ["progress", "EpochProgress", "on_terminal", "format_metrics"]


def progress(iterable=None, total=None, desc=None, disable=False, **kwargs):
    """Wrap ``iterable`` in a progress bar (``tqdm.auto.tqdm`` with the same arguments).

    ``total`` defaults to ``len(iterable)`` when it has one (a DataLoader does).  Without
    tqdm a one-line text counter is written to stderr instead.
    """
    if total is None and iterable is not None and hasattr(iterable, "__len__"):
        try:
            total = len(iterable)
        except TypeError:
            total = None
    try:
        from tqdm.auto import tqdm
    except ImportError:
        return _PlainBar(iterable, total, desc, disable)
    return tqdm(iterable, total=total, desc=desc, disable=disable, **kwargs)


class _PlainBar:
    """The fallback: ``desc: 12/100 (3.4 it/s)`` rewritten in place, at most 10 times/s."""

    def __init__(self, iterable, total, desc, disable):
        self.iterable, self.total, self.desc, self.disable = iterable, total, desc, disable
        self.n = 0

    def __iter__(self):
        start = last = time.monotonic()
        for item in self.iterable:
            yield item
            self.n += 1
            now = time.monotonic()
            if not self.disable and now - last > 0.1:
                self._draw(now - start)
                last = now
        if not self.disable:
            self._draw(time.monotonic() - start)
            sys.stderr.write("\n")

    def __len__(self):
        if self.total is None:
            raise TypeError("progress: this iterable has no length")
        return self.total

    def _draw(self, elapsed):
        of = f"/{self.total}" if self.total is not None else ""
        rate = self.n / elapsed if elapsed > 0 else 0.0
        head = f"{self.desc}: " if self.desc else ""
        sys.stderr.write(f"\r{head}{self.n}{of} ({rate:.1f} it/s)")
        sys.stderr.flush()


def on_terminal(stream=None):
    """True when ``stream`` (default stderr) is a terminal.  Progress bars are drawn only
    there: in a log file or a pipe their carriage returns and escape sequences are noise."""
    stream = sys.stderr if stream is None else stream
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


def format_metrics(metrics):
    """``loss 0.1234  test_acc 0.9712  seconds 1.2``: one epoch's metrics on one line."""
    return "  ".join(f"{k} {v:.4g}" if isinstance(v, float) else f"{k} {v}"
                     for k, v in metrics.items())


class EpochProgress:
    """Iterate over epochs ``[start, stop)`` of ``total`` and ``show`` each one's metrics:
    on a terminal as a tqdm bar on stderr with the latest metrics beside it, elsewhere as
    one plain line per epoch on stdout (all but the last, which the run's final report
    gives).  ``quiet`` shows nothing; ``draw=False`` never draws the bar.  The demo and
    the training scripts of ``examples/`` share it."""

    def __init__(self, start, stop, total, quiet=False, draw=None, desc="epochs"):
        from tqdm import tqdm
        draw = on_terminal() if draw is None else draw
        self.total, self.quiet, self.epoch, self.stop = total, quiet, start, stop
        self.bar = tqdm(range(start, stop), total=total, initial=start, desc=desc,
                        unit="epoch", disable=quiet or not draw, file=sys.stderr,
                        dynamic_ncols=True)

    def __iter__(self):
        for self.epoch in self.bar:
            yield self.epoch

    def show(self, metrics):
        if self.quiet:
            return
        if not self.bar.disable:
            self.bar.set_postfix_str(format_metrics(metrics), refresh=True)
        elif self.epoch + 1 < self.stop:
            print(f"epoch {self.epoch + 1}/{self.total}: {format_metrics(metrics)}",
                  flush=True)
