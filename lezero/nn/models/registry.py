"""``list_models()`` and ``get_model(name, **kwargs)``: the zoo by name, as torchvision's.

A model module registers each public builder with ``@register_model``; the name is the
builder's own (``resnet18``) unless given (``"bert"`` for ``BertForMaskedLM``).  The
builder takes the reference's constructor arguments (torchvision's ``num_classes``, a
Hugging Face config's field names), so ``get_model("resnet18", num_classes=10)`` is
``resnet18(num_classes=10)``.
"""
from lezero.utils.checks import check_type

__all__ = ["register_model", "list_models", "get_model"]

_MODELS = {}


def register_model(name=None):
    """Decorator: record a model builder (a function or a Module class) under ``name``."""
    def deco(builder):
        key = name or builder.__name__.lower()
        if key in _MODELS and _MODELS[key] is not builder:
            raise ValueError(f"register_model: {key!r} is registered twice")
        _MODELS[key] = builder
        return builder
    return deco


def _load_zoo():
    import lezero.nn.models  # noqa: F401  (importing the zoo registers every model)


def list_models():
    """The names ``get_model`` accepts, sorted."""
    _load_zoo()
    return sorted(_MODELS)


def get_model(name, **kwargs):
    """Build the model registered as ``name`` with the builder's keyword arguments."""
    check_type("get_model", "name", name, str, "a model name (str)")
    _load_zoo()
    key = name.lower()
    if key not in _MODELS:
        import difflib
        close = difflib.get_close_matches(key, _MODELS, n=3)
        hint = f"; did you mean {', '.join(map(repr, close))}?" if close else ""
        raise ValueError(f"get_model: unknown model {name!r}{hint} "
                         f"(list_models() gives all {len(_MODELS)})")
    return _MODELS[key](**kwargs)
