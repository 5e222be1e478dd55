"""``jit.trace``: record one run of a function or Module as a guarded ``StaticGraph``."""
from lezero.random import get_rng_state
from lezero.jit import checks
from lezero.jit.errors import TraceError
from lezero.jit.passes import optimize as run_passes
from lezero.jit.static_graph import StaticGraph, _Compiled, signature_of
from lezero.jit.tracer import (_name, is_module, mode_of, module_param_names, record,
                               report_reads)
from lezero.utils.checks import check_bool, check_callable, check_int

__all__ = ["trace"]


def trace(fn_or_module, *example_inputs, check_trace=True, strict=False, optimize=True,
          fuse=True, freeze=False, retrace=False, verify=0, rtol=1e-4, atol=1e-5):
    """Trace ``fn_or_module(*example_inputs)`` into a ``StaticGraph`` callable like it.

    * ``example_inputs``: arrays or Variables become graph inputs (shapes and dtypes are
      guarded); other arguments are constants of the graph (guarded by value).
    * ``check_trace``: run a second time on inputs with other values and refuse the trace
      when the operators or a constant changed (data-dependent control flow, values
      computed outside LeZero operators).
    * ``strict``: a value read in Python during the trace (``.item()``, ``bool()``,
      ``float()``, ``int()``) is an error instead of a ``TracerWarning``.
    * ``optimize``/``fuse``/``freeze``: run the passes (dead code, constant folding,
      CSE, elementwise fusion, memory plan); ``freeze`` treats parameters as constants
      (inference only: training updates are then not seen).
    * ``retrace``: trace again on a guard mismatch instead of raising ``GuardError``.
    * ``verify=N``: compare the next N calls against eager execution (``rtol``, ``atol``).
    """
    fn = check_callable("jit.trace", "fn_or_module", fn_or_module)
    for flag in ("check_trace", "strict", "optimize", "fuse", "freeze", "retrace"):
        check_bool("jit.trace", flag, locals()[flag])
    verify = check_int("jit.trace", "verify", verify, low=0)
    name = _name(fn) if not is_module(fn) else type(fn).__name__
    param_names = module_param_names(fn)

    def compile_for(args):
        mode = mode_of(fn)
        before = checks.buffer_snapshot(fn)
        rng_before = get_rng_state()
        rec = record(fn, args, param_names)
        checks.check_buffers(fn, before, name)
        checks.mark_stochastic(rec.graph, mode[0])
        checks.check_random(rec.graph, rng_before, name)
        report_reads(rec.reads, strict, fn)
        if check_trace:
            try:
                checks.check_trace(fn, args, rec, param_names, name, rng_before)
            except TraceError as e:
                if not rec.reads:
                    raise
                where = sorted({f"{what}() at {loc}" for what, loc in rec.reads})
                raise TraceError(f"{e}; the function read traced values in Python "
                                 f"({'; '.join(where[:3])}): data-dependent control flow "
                                 "or numbers") from None
        raw = rec.graph
        graph = run_passes(raw, fuse=fuse, freeze=freeze) if optimize else raw
        return _Compiled(graph, raw, signature_of(args), mode)

    first = compile_for(example_inputs)
    return StaticGraph(first.graph, first.raw_graph, first.signature, first.mode, fn=fn,
                       retrace=compile_for if retrace else None, verify=verify, rtol=rtol,
                       atol=atol, name=name)
