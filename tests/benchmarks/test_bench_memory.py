"""benchmarks/bench_memory.py's helpers on tiny workloads: what PyTorch's hooks and
profiler count, what tracemalloc and lz.memory count for LeZero, the fresh-process
resident set, and the table's ratios and marks.  (The workloads themselves take minutes:
`python benchmarks/bench_memory.py --quick` is their smoke run.)"""
import os
import sys

import numpy as np
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
import _mem_measure as M  # noqa: E402
import _mem_rss as R  # noqa: E402
import _mem_table as T  # noqa: E402
from _mem_workloads import Case  # noqa: E402

MIB = 2 ** 20


def test_pytorch_kept_counts_each_saved_storage_once_and_no_parameter():
    torch = pytest.importorskip("torch")
    torch.manual_seed(0)
    lin = torch.nn.Linear(64, 32)
    x = torch.randn(16, 64)

    def loss(dtype):
        y = torch.relu(lin(x))              # addmm saves x (the weight is a parameter)
        return (y * y).sum()                # relu saves y; mul saves y (the same storage)

    figures = M.torch_step(Case(lin, list(lin.parameters()), loss), None)
    assert figures["kept"] == x.nbytes + 16 * 32 * 4
    assert figures["copies"] == 0
    # the peak counts what the step allocates (x was there before): y and the gradients
    assert figures["peak"] >= 16 * 32 * 4 + lin.weight.nbytes


def test_pytorch_kept_leaves_out_autocast_copies_of_parameters_and_counts_them():
    torch = pytest.importorskip("torch")
    lin = torch.nn.Linear(64, 32)
    x = torch.randn(16, 64, requires_grad=True)     # so the weight's copy is saved too

    def loss(dtype):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            return lin(x).float().sum()

    # addmm saves the bfloat16 copy of x and the weight's copy through its transpose
    figures = M.torch_step(Case(lin, list(lin.parameters()), loss), "bfloat16")
    assert figures["copies"] == lin.weight.numel() * 2
    assert figures["kept"] == x.numel() * 2


def test_the_profiler_peak_is_the_highest_running_sum_of_allocations():
    torch = pytest.importorskip("torch")
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU],
                                profile_memory=True) as prof:
        a = torch.empty(1_000_000)          # 4 MB
        b = torch.empty(250_000)            # 1 MB: 5 MB together
        del a
        c = torch.empty(750_000)            # 3 MB, after 4 MB were freed: 4 MB
        del b, c
    assert M.profiler_peak(prof) == 5_000_000


def test_lezero_kept_is_tracemallocs_growth_and_lz_memory_counts_the_same_bytes():
    import lezero as lz
    import lezero.functions as F
    from lezero import nn
    lz.manual_seed(0)
    lin = nn.Linear(1024, 1024)             # 4 MiB of weight: not part of kept

    def loss(dtype):
        x = lz.Variable(np.ones((256, 1024), np.float32), requires_grad=False)   # 1 MiB
        return F.sum(F.relu(lin(x)))        # kept: x (for the weight's grad), relu's 1 MiB

    figures = M.lezero_step(Case(lin, list(lin.parameters()), loss), None)
    assert figures["lz"] == 2 * MIB and figures["lz_copies"] == 0
    assert abs(figures["kept"] - 2 * MIB) < 0.05 * MIB
    assert figures["peak"] >= figures["kept"] + 4 * MIB          # the weight's gradient
    assert all(p.grad is None for p in lin.parameters())


def test_unique_bytes_counts_a_buffer_once_through_its_views():
    a = np.zeros(1000, np.float32)
    assert M.unique_bytes([a, a[:10], a.reshape(10, 100), np.zeros(3)]) == 4000 + 24


def test_a_fresh_process_reports_its_own_peak_not_its_parents():
    held = np.ones(768 * MIB, np.uint8)     # resident in this process
    rss, error = R.fresh_rss("lezero", "lstm", "float32", quick=True, threads=1, timeout=120)
    assert error is None
    assert rss["reset"] and 0 < rss["before"] <= rss["peak"] < held.nbytes
    assert rss["increase"] == rss["peak"] - rss["before"]
    del held


def test_a_failing_fresh_process_says_why():
    rss, error = R.fresh_rss("lezero", "no_such_workload", "float32", timeout=60)
    assert rss is None and error.startswith("exit 1:") and "no_such_workload" in error


def results(kept, torch_kept, lz, dtype="float32", ran=None, copies=0):
    ours = {"kept": kept, "peak": 2 * kept, "lz": lz, "lz_copies": copies}
    theirs = {"kept": torch_kept, "peak": 2 * torch_kept, "copies": copies,
              "dtype": ran or dtype}
    return {("w", dtype): {"lezero": ours, "torch": theirs}}


def test_the_kept_and_peak_row_gives_mib_ratios_and_marks():
    rows = T.kept_peak_rows(results(130 * MIB, 100 * MIB, 130 * MIB), ["w"], "float32")
    assert rows == [["w", "130.0", "100.0", "1.30 ok", "0.0", "0.0", "1.30 ok", "260.0",
                     "200.0", "1.30 ok"]]
    rows = T.kept_peak_rows(results(131 * MIB, 100 * MIB, 0, "float16", "bfloat16",
                                    copies=31 * MIB), ["w"], "float16")
    assert rows[0][0] == "w (bfloat16*)" and rows[0][3] == "1.31 MISS"
    assert rows[0][4:7] == ["31.0", "31.0", "1.00 ok"]      # PyTorch's kept + its copies


def test_lz_memory_is_flagged_beyond_five_percent_of_tracemalloc():
    ok = T.agreement_rows(results(100 * MIB, 1, 96 * MIB), ["w"], ["float32"])
    over = T.agreement_rows(results(100 * MIB, 1, 94 * MIB), ["w"], ["float32"])
    assert ok[0][-2:] == ["-4.0%", "ok"] and over[0][-2:] == ["-6.0%", "OVER 5%"]


def test_a_missing_figure_is_na_and_the_table_aligns_its_columns():
    assert T.cell(T.ratio(None, 5)) == "n/a" and T.cell(T.ratio(5, 0)) == "n/a"
    lines = T.table(["name", "x"], [["a", "1.0"], ["bbbbbb", "10.25"]])
    assert lines == ["name        x", "a         1.0", "bbbbbb  10.25"]
