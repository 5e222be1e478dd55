"""Memory of one training step, LeZero beside PyTorch (CPU), float32 and autocast.

    python benchmarks/bench_memory.py                          # every workload, 7-15 min
    python benchmarks/bench_memory.py --workloads resnet18 --dtypes float32 --no-rss
    python benchmarks/bench_memory.py --quick --no-rss         # smoke sizes, ~30 s

Workloads (the same weights in both: PyTorch's state_dict loaded into LeZero): ResNet-18
with the CIFAR stem (b32 of 3x32x32), ResNet-50 (b8 of 3x224x224, 1000 classes), BERT-base
masked LM (b4, seq 128; HF's BertForMaskedLM), GPT-2 small LM (b2, seq 128; HF's
GPT2LMHeadModel), the zoo's character LSTM as examples/train_char_lstm.py configures it
(b16, bptt 32; a torch nn.LSTM of the same shape).  Training mode (dropout on), the
frameworks' default kernels (HF's default attention).  Every figure follows a full warm
step, with the parameters' grads set to None and ``gc.collect()`` first.

* kept: what the graph holds once ``loss = forward()`` returns.  LeZero: tracemalloc's
  traced memory after forward minus before.  PyTorch: the storages saved for backward
  (``saved_tensors_hooks``, each storage once, parameters and autocast's copies of them
  excluded; the table also gives a ratio with those copies added to PyTorch's side, as
  LeZero's tracemalloc figure includes its own).
* peak: the step's peak over forward and backward, gradients included.  LeZero:
  tracemalloc's peak.  PyTorch: ``torch.profiler.profile(profile_memory=True)``: the
  peak of the running sum of its CPU allocator's allocations and frees during the step.
* RSS: a fresh process per (framework, workload, dtype) builds the model and runs one
  step: resident set before the step, the process's high-water mark, and the step's own
  increase (``_mem_rss.py`` says why VmHWM and not ``ru_maxrss``).
* lz.memory: what ``lz.memory.profile`` counts as kept after forward (saved bytes minus
  the model's parameters: activations plus autocast's parameter copies), against
  tracemalloc's kept; the issue requires agreement within 5%.

Autocast: LeZero ``amp.autocast(dtype)``, PyTorch ``torch.autocast("cpu", dtype)``.
PyTorch's CPU float16 is not measured where it cannot run a step in reasonable time or at
all (convolutions: minutes per ResNet-18 step; LSTM: oneDNN has no float16 LSTM): its
bfloat16 figure (the same bytes per element) stands in, marked ``(bfloat16*)``;
``--torch-float16`` measures float16 anyway.
"""
import argparse
import gc
import os
import sys
import time
import warnings

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import set_threads  # noqa: E402
from _record import run_main  # noqa: E402
import _mem_table as T  # noqa: E402
from _mem_measure import lezero_step, torch_step  # noqa: E402
from _mem_rss import fresh_rss  # noqa: E402
from _mem_workloads import WORKLOADS, build_pair  # noqa: E402

DTYPES = ("float32", "float16", "bfloat16")
# PyTorch's CPU autocast in float16: impractically slow (convolutions) or missing (LSTM).
TORCH_NO_FLOAT16 = {"resnet18", "resnet50", "lstm"}


def torch_dtype(name, dtype, force_float16):
    """The dtype PyTorch runs for ``dtype`` (bfloat16 stands in for float16 where
    PyTorch's CPU float16 is impractical)."""
    if dtype == "float16" and name in TORCH_NO_FLOAT16 and not force_float16:
        return "bfloat16"
    return dtype


def autocast_arg(dtype):
    return None if dtype == "float32" else dtype


def measure_workload(name, dtypes, args):
    """{(name, dtype): {"lezero": figures, "torch": figures}} in this process."""
    theirs, ours = build_pair(name, args.quick)
    torch_runs, out = {}, {}
    for dtype in dtypes:
        progress(f"{name} {dtype}")
        gc.collect()
        ran = torch_dtype(name, dtype, args.torch_float16)
        if ran not in torch_runs:
            try:
                torch_runs[ran] = torch_step(theirs, autocast_arg(ran))
            except RuntimeError as e:
                torch_runs[ran] = {"error": str(e).splitlines()[0][:100]}
        out[(name, dtype)] = {"lezero": lezero_step(ours, autocast_arg(dtype)),
                              "torch": dict(torch_runs[ran], dtype=ran)}
    return out


def measure_rss(results, workloads, dtypes, args, threads):
    """Add each fresh process's figures (or why it failed) to ``results``."""
    runs = {}
    for name in workloads:
        for dtype in dtypes:
            for side in ("lezero", "torch"):
                ran = dtype if side == "lezero" else results[(name, dtype)]["torch"]["dtype"]
                if (side, name, ran) not in runs:
                    progress(f"fresh process: {side} {name} {ran}")
                    runs[(side, name, ran)] = fresh_rss(side, name, ran, args.quick,
                                                        threads, args.timeout)
                rss, error = runs[(side, name, ran)]
                results[(name, dtype)][side].update(rss=rss, rss_error=error)


def progress(text, start=time.perf_counter()):
    """A line on stderr (not part of the recorded table), with the seconds so far."""
    print(f"... {time.perf_counter() - start:6.0f} s  {text}", file=sys.stderr, flush=True)


def print_tables(results, workloads, dtypes, rss):
    for dtype in dtypes:
        print(f"\n== {dtype}: kept after forward and step peak, MiB "
              f"(ratio LeZero / PyTorch, must <= {T.MUST})")
        head = ["workload", "kept LeZero", "PyTorch", "ratio", "param copies LeZero",
                "PyTorch", "ratio, copies in both", "peak LeZero", "PyTorch", "ratio"]
        print("\n".join(T.table(head, T.kept_peak_rows(results, workloads, dtype))))
        if rss:
            print(f"\n-- {dtype}: fresh process, one step: resident MiB before it, the "
                  f"high-water mark, the step's increase")
            head = ["workload", "LeZero before", "peak", "+step", "PyTorch before", "peak",
                    "+step", "peak ratio", "+step ratio"]
            print("\n".join(T.table(head, T.rss_rows(results, workloads, dtype))))
    low = [d for d in dtypes if d != "float32"]
    if low and "float32" in dtypes:
        print(f"\n== LeZero autocast against LeZero float32 (kept must <= "
              f"{T.AUTOCAST_KEPT}, peak must <= {T.AUTOCAST_PEAK})")
        head = ["workload", "dtype", "kept MiB", "ratio", "peak MiB", "ratio"]
        print("\n".join(T.table(head, T.autocast_rows(results, workloads, low))))
    print(f"\n== lz.memory against tracemalloc, kept after forward (must agree within "
          f"{T.AGREE:.0%})")
    head = ["workload", "dtype", "tracemalloc MiB", "lz.memory MiB", "of it param copies",
            "difference", ""]
    print("\n".join(T.table(head, T.agreement_rows(results, workloads, dtypes))))
    print_notes(results, workloads, dtypes)


def print_notes(results, workloads, dtypes):
    notes = set()
    for (name, dtype), entry in results.items():
        if entry["torch"].get("dtype") != dtype:
            notes.add(f"* {name}: PyTorch's CPU float16 stands in with bfloat16 "
                      f"(--torch-float16 measures it)")
        for side in ("lezero", "torch"):
            if entry[side].get("error"):
                notes.add(f"* {name} {dtype} {side}: {entry[side]['error']}")
            if entry[side].get("rss_error"):
                notes.add(f"* {name} {dtype} {side} fresh process: {entry[side]['rss_error']}")
    if notes:
        print("\n" + "\n".join(sorted(notes)))


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--workloads", nargs="+", choices=list(WORKLOADS), default=list(WORKLOADS))
    p.add_argument("--dtypes", nargs="+", choices=DTYPES, default=list(DTYPES))
    p.add_argument("--no-rss", action="store_true", help="skip the fresh processes")
    p.add_argument("--quick", action="store_true", help="smoke sizes (not the figures)")
    p.add_argument("--torch-float16", action="store_true",
                   help="run PyTorch's CPU float16 where it is very slow or fails")
    p.add_argument("--timeout", type=int, default=600, help="seconds per fresh process")
    args = p.parse_args(argv)
    warnings.filterwarnings("ignore")
    threads = set_threads()
    print(f"threads: {threads}" + ("; --quick: smoke sizes, not the workloads" * args.quick))
    results = {}
    for name in args.workloads:
        results.update(measure_workload(name, args.dtypes, args))
    if not args.no_rss:
        measure_rss(results, args.workloads, args.dtypes, args, threads)
    print_tables(results, args.workloads, args.dtypes, not args.no_rss)
    return results


if __name__ == "__main__":
    run_main(main)
