"""The memory benchmark's tables: MiB figures, LeZero / PyTorch ratios and their marks.

``results[(workload, dtype)]`` holds ``{"lezero": {...}, "torch": {...}}``: the byte
figures of _mem_measure.py (LeZero's ``kept``, ``peak``, ``lz``, ``lz_copies``; PyTorch's
``kept``, ``peak``, ``copies``), and, where the fresh processes ran, ``rss`` (_mem_rss.py's
figures) or ``rss_error``.  ``torch["dtype"]`` is the dtype PyTorch actually ran (see
``torch_label``) and ``torch["error"]`` says why it could not run.
"""
MUST = 1.3          # LeZero / PyTorch, every figure (issue 34)
AUTOCAST_KEPT = 0.6     # LeZero autocast / LeZero float32, kept after forward
AUTOCAST_PEAK = 0.75    # LeZero autocast / LeZero float32, step peak
AGREE = 0.05        # lz.memory against tracemalloc


def mib(n):
    return "-" if n is None else f"{n / 2 ** 20:.1f}"


def ratio(ours, theirs):
    return None if ours is None or not theirs else ours / theirs


def cell(r, limit=None):
    """'1.23 ok', '1.48 MISS', '0.91' (no limit) or 'n/a'."""
    if r is None:
        return "n/a"
    if limit is None:
        return f"{r:.2f}"
    return f"{r:.2f} {'ok' if r <= limit else 'MISS'}"


def disagreement(lz, traced):
    """lz.memory's figure against tracemalloc's, as a signed fraction of tracemalloc's."""
    return None if not traced else (lz - traced) / traced


def table(headers, rows):
    """Lines of a table: the first column left-aligned, the others right-aligned, each as
    wide as its widest entry."""
    widths = [max(len(str(r[i])) for r in [headers] + rows) for i in range(len(headers))]

    def line(r):
        first = f"{r[0]:<{widths[0]}}"
        return "  ".join([first] + [f"{r[i]:>{widths[i]}}" for i in range(1, len(r))])
    return [line(headers)] + [line(r) for r in rows]


def get(figures, key):
    return None if figures is None else figures.get(key)


def torch_label(dtype, theirs):
    """The PyTorch column's dtype note: '' when it ran ``dtype`` itself."""
    ran = theirs.get("dtype", dtype)
    return "" if ran == dtype else f" ({ran}*)"


def kept_peak_rows(results, workloads, dtype):
    rows = []
    for name in workloads:
        ours, theirs = results[(name, dtype)]["lezero"], results[(name, dtype)]["torch"]
        tk, tp, tc = get(theirs, "kept"), get(theirs, "peak"), get(theirs, "copies")
        rows.append([name + torch_label(dtype, theirs), mib(ours["kept"]), mib(tk),
                     cell(ratio(ours["kept"], tk), MUST), mib(ours["lz_copies"]), mib(tc),
                     cell(ratio(ours["kept"], None if tk is None else tk + tc), MUST),
                     mib(ours["peak"]), mib(tp), cell(ratio(ours["peak"], tp), MUST)])
    return rows


def rss_rows(results, workloads, dtype):
    rows = []
    for name in workloads:
        entry = results[(name, dtype)]
        ours, theirs = get(entry["lezero"], "rss"), get(entry["torch"], "rss")
        row = [name + torch_label(dtype, entry["torch"])]
        for side in (ours, theirs):
            row += [mib(get(side, "before")), mib(get(side, "peak")), mib(get(side, "increase"))]
        row += [cell(ratio(get(ours, "peak"), get(theirs, "peak")), MUST),
                cell(ratio(get(ours, "increase"), get(theirs, "increase")), MUST)]
        rows.append(row)
    return rows


def agreement_rows(results, workloads, dtypes):
    rows = []
    for name in workloads:
        for dtype in dtypes:
            ours = results[(name, dtype)]["lezero"]
            d = disagreement(ours["lz"], ours["kept"])
            flag = "" if d is None else ("ok" if abs(d) <= AGREE else "OVER 5%")
            rows.append([name, dtype, mib(ours["kept"]), mib(ours["lz"]),
                         mib(ours["lz_copies"]), "n/a" if d is None else f"{d * 100:+.1f}%",
                         flag])
    return rows


def autocast_rows(results, workloads, dtypes):
    rows = []
    for name in workloads:
        base = results[(name, "float32")]["lezero"]
        for dtype in dtypes:
            ours = results[(name, dtype)]["lezero"]
            rows.append([name, dtype, mib(ours["kept"]),
                         cell(ratio(ours["kept"], base["kept"]), AUTOCAST_KEPT),
                         mib(ours["peak"]), cell(ratio(ours["peak"], base["peak"]),
                                                 AUTOCAST_PEAK)])
    return rows
