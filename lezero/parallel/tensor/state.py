"""Dense state dicts in and out of a tensor-parallel model.

A parallel model keeps the dense model's state-dict *keys*; only the shapes of the
sharded entries differ (each parallel layer's ``tp_shard_specs`` says how).  So:

* ``load_dense_state_dict(model, dense)``: cut every sharded entry of a dense state dict
  (LeZero's ``GPT``, or a PyTorch model's converted to arrays) into this rank's shard and
  load it -- the way PyTorch weights get into a tensor-parallel model;
* ``dense_state_dict(model)`` (collective over each layer's tensor group): all-gather
  the shards back into the dense arrays, padding trimmed -- loadable into the dense model;
* ``shard_specs(model)``: {key: ShardSpec} of the sharded entries (written into sharded
  checkpoints, so they can be consolidated offline).

``model`` may also be a ``Pipeline``: its local stages' keys are used.
"""
from collections import OrderedDict

from lezero.backends import get_backend
from lezero.core import Variable
from lezero.parallel.tensor.sharding import shard, unshard


def _parts(model):
    """[module] whose state dicts make up ``model``'s (a Pipeline's local stages)."""
    from lezero.parallel.pipeline.engine import Pipeline
    if isinstance(model, Pipeline):
        return [model.stages[str(v)] for v in model.local_stage_ids]
    return [model]


def _walk(module, path):
    for part in path.split(".") if path else []:
        module = module._modules[part]
    return module


def _entries(model):
    """(key, value array, owning module, local name) for every state-dict entry."""
    out, seen = [], set()
    for part in _parts(model):
        for key, value in part.state_dict().items():
            if key in seen:
                continue
            seen.add(key)
            path, _, name = key.rpartition(".")
            out.append((key, value, _walk(part, path), name))
    return out


def shard_specs(model):
    """{key: (ShardSpec, tensor communicator)} for the sharded entries of ``model``."""
    specs = {}
    for key, _, owner, name in _entries(model):
        spec = getattr(owner, "tp_shard_specs", {}).get(name)
        if spec is not None:
            specs[key] = (spec, owner.comm)
    return specs


def _as_array(value, like):
    value = value.data if isinstance(value, Variable) else value
    return get_backend(like).asarray(value)      # a torch tensor, a list: as host data


def shard_state_dict(model, dense_state):
    """{key: this rank's value} from a dense state dict: sharded entries cut, the rest
    as they are.  Keys the model lacks are kept (``load_state_dict`` reports them)."""
    specs = shard_specs(model)
    targets = {key: value for key, value, _, _ in _entries(model)}
    out = OrderedDict()
    for key, value in dense_state.items():
        if key in specs and key in targets:
            spec, comm = specs[key]
            out[key] = shard(_as_array(value, targets[key]), spec, comm.rank, comm.size)
        else:
            out[key] = value
    return out


def load_dense_state_dict(model, dense_state, strict=True):
    """Load a dense state dict into a tensor-parallel model (or Pipeline's stages).

    ``strict``: every key of the model must be present and (for a single model) no
    other; a Pipeline's stages take their own keys of a whole model's state dict."""
    sharded = shard_state_dict(model, dense_state)
    parts = _parts(model)
    if len(parts) == 1 and parts[0] is model:
        return model.load_state_dict(sharded, strict=strict)
    missing = []
    for part in parts:
        own = {k: sharded[k] for k in part.state_dict() if k in sharded}
        missing += part.load_state_dict(own, strict=False).missing_keys
    if strict and missing:
        raise KeyError(f"load_dense_state_dict: missing keys {missing}")
    return missing


def dense_state_dict(model):
    """Collective over every tensor group of ``model``: the dense state dict (full
    arrays, padding trimmed) on every rank."""
    specs = shard_specs(model)
    out = OrderedDict()
    for key, value, _, _ in _entries(model):
        if key in specs:
            spec, comm = specs[key]
            gathered = comm.allgather(value)
            out[key] = unshard([gathered[r] for r in range(comm.size)], spec)
        else:
            out[key] = value.copy()
    return out
