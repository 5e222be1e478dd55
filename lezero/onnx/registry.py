"""The ONNX mapping table: one rule per LeZero Function class, keyed by class name.

    @onnx_op("Add", opset=7, emits=("Add",))
    def _add(ctx, node): ...

A rule receives the export context and the graph node and emits ONNX nodes.  ``opset``
is the lowest opset at which the rule's output is valid; ``emits`` lists the ONNX operator
types it may produce (for the coverage table).  ``lezero.onnx.coverage`` joins this
table with the operator registry (``lezero.functions.registry.REGISTRY``) to tell which
public operators export.
"""
import dataclasses

__all__ = ["OnnxRule", "RULES", "onnx_op", "rule_for", "load_rules"]


@dataclasses.dataclass
class OnnxRule:
    """How one Function class becomes ONNX."""
    name: str
    fn: object
    opset: int
    emits: tuple
    notes: str = ""


RULES = {}


def onnx_op(*names, opset=13, emits=(), notes=""):
    """Decorator registering ``fn(ctx, node)`` as the rule for Function class ``names``."""
    def deco(fn):
        for name in names:
            if name in RULES:
                raise ValueError(f"onnx_op: a rule for {name!r} already exists")
            RULES[name] = OnnxRule(name, fn, opset, tuple(emits), notes)
        return fn
    return deco


def load_rules():
    """Import every rule module (registers them); returns the table."""
    from lezero.onnx import ops_math, ops_nn, ops_rnn, ops_shape  # noqa: F401
    from lezero.onnx import ops_route  # noqa: F401  (mixture-of-experts routing)
    from lezero.quantization import onnx_rules  # noqa: F401  (QDQ rules of INT8 models)
    return RULES


def rule_for(name):
    return load_rules().get(name)
