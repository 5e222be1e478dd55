"""ONNX's own node test cases run through ``lezero.onnx.backend``, each one classified.

``classify()`` runs every case that ``onnx.backend.test.loader.load_model_tests(kind=
"node")`` builds (onnx >= 1.23 builds them in memory from ``onnx.backend.test.case.node``)
with LeZero, its outputs *unchecked* (``prepare(..., check=False)``), so that a wrong
dtype or shape shows as such, and with onnxruntime on the same model when it is installed.
Each case is ``pass``, ``error`` (an exception) or ``WRONG`` (values, dtype or shape
differ, compared as onnx's runner compares: rtol 1e-3, atol 1e-7, dtype and shape exact),
and ``excluded`` when ``backend_exclusions.txt`` lists it.  ``tools/onnx_suite.py`` prints
the tables and regenerates the exclusion file; ``tests/onnx/test_backend_suite.py`` runs
the suite itself.

The exclusion file holds one entry a line, ``KEY | CATEGORY | REASON``: KEY is
``op:NAME`` (every case using operator NAME), ``type:NAME`` (every case with a graph input
or output of ONNX type NAME, e.g. ``FLOAT8E4M3FN``) or a regular expression that must
match a whole case name (``test_abs``, no device suffix).
"""
import collections
import os
import re
import warnings

import numpy as np

__all__ = ["Exclusion", "EXCLUSIONS_PATH", "CATEGORIES", "read_exclusions",
           "write_exclusions", "node_cases", "case_ops", "case_types", "find_exclusion", "case_operator", "run_lezero",
           "run_onnxruntime", "classify", "error_category", "per_operator", "totals",
           "markdown_table", "regenerate_exclusions"]

EXCLUSIONS_PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                               "backend_exclusions.txt")
CATEGORIES = ("unsupported-op", "unsupported-dtype", "unsupported-attribute",
              "unsupported-type", "numpy-lacks", "op-error", "wrong-answer")
RTOL, ATOL = 1e-3, 1e-7


class Exclusion(collections.namedtuple("Exclusion", "key category reason")):
    """One line of the exclusion file."""

    def matches(self, name, ops, types=()):
        if self.key.startswith("op:"):
            return self.key[3:] in ops
        if self.key.startswith("type:"):
            return self.key[5:] in types
        return re.fullmatch(self.key, name) is not None

    def line(self):
        return f"{self.key} | {self.category} | {self.reason}"


def read_exclusions(path=EXCLUSIONS_PATH):
    """The entries of the exclusion file (comments and blank lines skipped)."""
    entries = []
    with open(path, encoding="utf-8") as f:
        for number, text in enumerate(f, 1):
            text = text.strip()
            if not text or text.startswith("#"):
                continue
            parts = [p.strip() for p in text.split("|", 2)]
            if len(parts) != 3 or parts[1] not in CATEGORIES or not parts[2]:
                raise ValueError(f"{path}:{number}: expected 'KEY | CATEGORY | REASON' "
                                 f"with CATEGORY one of {', '.join(CATEGORIES)}; got "
                                 f"{text[:120]!r}")
            if not parts[0].startswith(("op:", "type:")):
                re.compile(parts[0])
            entries.append(Exclusion(*parts))
    return entries


_HEADER = """\
# ONNX backend test cases LeZero does not pass yet (tests/onnx/test_backend_suite.py skips
# them).  One entry a line: KEY | CATEGORY | REASON.  KEY is op:NAME (every case using the
# operator NAME), type:NAME (every case with a graph input or output of ONNX type NAME) or
# a regular expression matching a whole case name (no _cpu suffix).
# CATEGORY: {categories}.
# `python tools/onnx_suite.py --write-exclusions` regenerates this file from the cases that
# fail now, keeping the reasons written here by hand for the entries that stay.
"""


def write_exclusions(entries, path=EXCLUSIONS_PATH):
    """Write ``entries`` sorted by category then key, under the explaining header."""
    entries = sorted(entries, key=lambda e: (CATEGORIES.index(e.category), e.key))
    with open(path, "w", encoding="utf-8") as f:
        f.write(_HEADER.format(categories=", ".join(CATEGORIES)))
        for e in entries:
            f.write(e.line() + "\n")


def node_cases():
    """ONNX's node test cases (``onnx.backend.test.case.test_case.TestCase``)."""
    from onnx.backend.test.loader import load_model_tests
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        return [c for c in load_model_tests(kind="node") if c.model is not None]


def _graph_ops(graph, found):
    for node in graph.node:
        found.add(node.op_type)
        for a in node.attribute:
            for g in ([a.g] if a.HasField("g") else []) + list(a.graphs):
                _graph_ops(g, found)
    return found


def case_ops(model):
    """The sorted operator types of a model, subgraphs included."""
    return sorted(_graph_ops(model.graph, set()))


def case_types(model):
    """The ONNX type names of a model's graph inputs and outputs (tensors only)."""
    from onnx import TensorProto
    values = list(model.graph.input) + list(model.graph.output)
    return sorted({TensorProto.DataType.Name(v.type.tensor_type.elem_type) for v in values
                   if v.type.HasField("tensor_type")})


def find_exclusion(exclusions, model, name):
    """The first entry of ``exclusions`` that covers the case, or None."""
    ops, types = case_ops(model), case_types(model)
    return next((e for e in exclusions if e.matches(name, ops, types)), None)


def _all_operators():
    from onnx import defs
    return sorted({s.name for s in defs.get_all_schemas_with_history()}, key=len,
                  reverse=True)


def case_operator(name, model, operators=None):
    """The operator a case tests: the longest ONNX operator name that begins the case
    name (underscores ignored), else the operator of the graph's first node."""
    compact = name[len("test_"):].replace("_", "").lower()
    for op in operators or _all_operators():
        if compact.startswith(op.lower()):
            return op
    return model.graph.node[0].op_type if model.graph.node else "?"


def _value(x):
    """A test-data value as the runner feeds it: TensorProto -> array, scalar -> 0-d."""
    from onnx import numpy_helper
    if hasattr(x, "raw_data"):
        return numpy_helper.to_array(x)
    if isinstance(x, list):
        return [_value(v) for v in x]
    return x if x is None else np.asarray(x)


def _differs(ref_outputs, outputs):
    """None when ``outputs`` match as onnx's runner requires, else what differs."""
    from onnx.backend.test.runner import Runner
    if len(outputs) != len(ref_outputs):
        return f"{len(outputs)} outputs, expected {len(ref_outputs)}"
    for k, (out, ref) in enumerate(zip(outputs, ref_outputs)):
        if isinstance(ref, list) or isinstance(out, list) or ref is None or out is None:
            try:
                Runner.assert_similar_outputs([ref], [out], rtol=RTOL, atol=ATOL)
            except (AssertionError, TypeError, AttributeError) as e:
                return f"output {k}: sequence/optional differs ({str(e).strip()[:120]})"
            continue
        out, ref = np.asarray(out), np.asarray(ref)
        if out.shape != ref.shape:
            return f"output {k}: shape {out.shape}, expected {ref.shape}"
        if out.dtype != ref.dtype:
            return f"output {k}: dtype {out.dtype}, expected {ref.dtype}"
        try:
            Runner.assert_similar_outputs([ref], [out], rtol=RTOL, atol=ATOL)
        except AssertionError as e:
            lines = [s.strip() for s in str(e).splitlines() if s.strip()]
            mismatch = next((s for s in lines if s.startswith("Mismatched")), lines[-1:])
            return f"output {k}: values differ ({''.join(mismatch)})"
    return None


def _run(case, runner):
    """(status, detail) of ``runner(model, inputs) -> outputs`` over the case's data."""
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        try:
            for inputs, ref_outputs in case.data_sets:
                outputs = runner(case.model, [_value(x) for x in inputs])
                detail = _differs([_value(x) for x in ref_outputs], list(outputs))
                if detail:
                    return "WRONG", detail
        except Exception as e:            # every failure is a result here, not a crash
            return "error", f"{type(e).__name__}: {' '.join(str(e).split())[:400]}"
    return "pass", ""


def run_lezero(case):
    """(status, detail) of the case run by LeZero with unchecked outputs."""
    from lezero.onnx import backend
    return _run(case, lambda model, inputs: backend.prepare(model, check=False).run(inputs))


def _ort_runner(model, inputs):
    import onnxruntime as ort
    options = ort.SessionOptions()
    options.log_severity_level = 4      # fatal only: its failures are classified, not printed
    session = ort.InferenceSession(model.SerializeToString(), options,
                                   providers=["CPUExecutionProvider"])
    names = [i.name for i in session.get_inputs()]
    return session.run(None, dict(zip(names, inputs)))


def run_onnxruntime(case):
    """(status, detail) of the case run by onnxruntime (CPU)."""
    return _run(case, _ort_runner)


def _has_onnxruntime():
    try:
        import onnxruntime  # noqa: F401
    except ImportError:
        return False
    return True


def classify(cases=None, exclusions=None, with_onnxruntime=True, lezero_ops=None):
    """One dict per case: name, op (the operator it tests), ops, status (pass / error /
    WRONG as LeZero computes it), detail, excluded (the matching entry's category or
    None), reason, supported (every op in LeZero's import table), onnxruntime (its
    status, or None when not run)."""
    if lezero_ops is None:
        from lezero.onnx.import_ops import IMPORT_OPS
        lezero_ops = set(IMPORT_OPS)
    cases = node_cases() if cases is None else cases
    exclusions = read_exclusions() if exclusions is None else exclusions
    with_onnxruntime = with_onnxruntime and _has_onnxruntime()
    operators, base_op, rows = _all_operators(), {}, []
    for case in sorted(cases, key=lambda c: ("_expanded" in c.name, c.name)):
        ops = case_ops(case.model)
        base = re.sub(r"_expanded(_ver\d+)?$", "", case.name)
        op = base_op.get(base) or case_operator(case.name, case.model, operators)
        base_op.setdefault(case.name, op)
        status, detail = run_lezero(case)
        entry = find_exclusion(exclusions, case.model, case.name)
        rows.append({"name": case.name, "op": op, "ops": ops, "status": status,
                     "detail": detail, "excluded": entry and entry.category,
                     "reason": entry and entry.reason,
                     "supported": set(ops) <= lezero_ops,
                     "onnxruntime": run_onnxruntime(case)[0] if with_onnxruntime else None})
    return sorted(rows, key=lambda r: r["name"])


def error_category(row):
    """The exclusion category a failing row falls in, from its error text."""
    detail = row["detail"]
    if row["status"] == "WRONG":
        return "wrong-answer"
    if "which LeZero cannot import" in detail:
        return "unsupported-op"
    if "which LeZero does not support" in detail or "is not supported (LeZero reads" \
            in detail:
        return "unsupported-dtype"
    if "is of a kind LeZero does not read" in detail:
        return "unsupported-attribute"
    if "LeZero runs tensors only" in detail:
        return "unsupported-type"
    if "bfloat16" in detail or "bfloat16" in row["name"] or "bf16" in row["name"]:
        return "numpy-lacks"        # NumPy has no bfloat16 arithmetic of its own
    return "op-error"


def _reason(row):
    """The part of an error that says what is wrong, for the exclusion file."""
    detail = row["detail"]
    for marker in (" failed: ", "OnnxImportError: "):
        if marker in detail:
            detail = detail.split(marker, 1)[1]
            break
    return detail[:160].replace("|", "/")


def _group_key(row, category):
    """``op:NAME`` for an operator LeZero lacks, ``type:NAME`` for a type it has no arrays
    for, else None (the case is listed by name)."""
    patterns = {"unsupported-op": (r"uses operator '([^']+)', which LeZero cannot import",
                                   "op:"),
                "unsupported-dtype": (r"has type (\w+), which LeZero does not support",
                                      "type:")}
    if category not in patterns:
        return None
    pattern, prefix = patterns[category]
    match = re.search(pattern, row["detail"])
    return match and prefix + match.group(1)


def regenerate_exclusions(rows, old=()):
    """Entries covering the failing rows: ``op:NAME`` for an operator LeZero lacks,
    ``type:NAME`` for a type it has no arrays for, the case name otherwise; a hand-written reason of an entry with the same key stays."""
    kept = {e.key: e for e in old}
    entries = {}
    for row in rows:
        if row["status"] == "pass":
            continue
        category = error_category(row)
        key = _group_key(row, category)
        if key and key.startswith("op:"):
            reason = f"LeZero has no {key[3:]} import"
        elif key:
            reason = f"LeZero has no arrays of ONNX type {key[5:]}"
        else:
            key, reason = re.escape(row["name"]), _reason(row)
        previous = kept.get(key)
        if previous is not None and previous.category == category:
            reason = previous.reason
        entries.setdefault(key, Exclusion(key, category, reason))
    return list(entries.values())


def per_operator(rows):
    """{operator: Counter(cases, passed, excluded, wrong, errors, onnxruntime)}, sorted."""
    table = collections.defaultdict(collections.Counter)
    for r in rows:
        c = table[r["op"]]
        c["cases"] += 1
        c["passed"] += r["status"] == "pass"
        c["excluded"] += bool(r["excluded"])
        c["wrong"] += r["status"] == "WRONG"
        c["errors"] += r["status"] == "error"
        c["onnxruntime"] += r["onnxruntime"] == "pass"
    return dict(sorted(table.items()))


def _share(part, whole):
    return f"{part} of {whole} ({100.0 * part / whole:.1f}%)" if whole else "0 of 0"


def totals(rows):
    """The three lines of issue 36's table: (label, LeZero passes, extra) per line."""
    passed = [r for r in rows if r["status"] == "pass"]
    supported = [r for r in rows if r["supported"]]
    ort_rows = [r for r in rows if r["onnxruntime"] == "pass"]
    ort_failed = [r for r in ort_rows if r["status"] != "pass"]
    wrong = sum(r["status"] == "WRONG" for r in ort_failed)
    ran_ort = any(r["onnxruntime"] is not None for r in rows)
    return [
        ("all node cases", _share(len(passed), len(rows)),
         f"onnxruntime passes {len(ort_rows)}" if ran_ort else "onnxruntime not run"),
        ("cases whose every operator is in LeZero's import table",
         _share(sum(r["status"] == "pass" for r in supported), len(supported)), ""),
        ("cases onnxruntime passes",
         _share(len(ort_rows) - len(ort_failed), len(ort_rows)) if ran_ort else "not run",
         f"{wrong} of the {len(ort_failed)} failures are silently wrong" if ran_ort else ""),
    ]


def markdown_table(rows):
    """The totals and the per-operator table, as Markdown."""
    lines = ["| | LeZero passes | |", "|---|---|---|"]
    lines += [f"| {label} | {share} | {extra} |" for label, share, extra in totals(rows)]
    wrong = sum(r["status"] == "WRONG" for r in rows)
    lines += ["", f"Silently wrong answers (values, dtype or shape): {wrong}.", "",
              "| operator | cases | passed | excluded | wrong | onnxruntime passes |",
              "|---|---:|---:|---:|---:|---:|"]
    for op, c in per_operator(rows).items():
        lines.append(f"| {op} | {c['cases']} | {c['passed']} | {c['excluded']} | "
                     f"{c['wrong']} | {c['onnxruntime']} |")
    return "\n".join(lines)
