"""Sharded checkpoints: each (tensor, pipeline) shard writes its own file, atomically.

    parallel.save_sharded_checkpoint("ck", model, extra={"optimizer": opt.state_dict()},
                                     grid=grid)
    extra = parallel.load_sharded_checkpoint("ck", model, grid=grid)  # same layout
    dense = parallel.consolidate_checkpoint("ck")      # one process: the dense state dict

A checkpoint is a folder: ``shard-tp{t}-pp{p}-v{n}.npz`` for every tensor index ``t``
and pipeline index ``p`` (written by the data-parallel rank 0 of each, with ``lz.save``,
i.e. ``atomic_write``), and ``manifest.json`` -- the layout, the files of version ``n``
and each file's shard specs -- written by rank 0 only after every shard file is
complete.  The manifest is the commit point: a crash before it leaves the previous
version's manifest and files intact (the new files carry a new version number), and the
old version's files are removed only after the new manifest is in place.

Without a ``grid``, ``comm`` (default: the world) is taken as the tensor group: every
rank writes its shard.  Loading needs the same (tp, pp) layout; any other layout loads
``consolidate_checkpoint``'s dense state dict with ``load_dense_state_dict``.  The ranks
read the files themselves (a file system they share).
"""
import json
import os

from lezero.parallel.tensor.sharding import ShardSpec, unshard
from lezero.parallel.tensor.state import shard_specs

MANIFEST = "manifest.json"
FORMAT = "lezero-sharded-checkpoint-1"


def _layout(grid, comm):
    """(world, writes?, tp index, pp index, tp size, pp size, dp size)."""
    if grid is not None:
        c = grid.coord
        return grid.comm, c.dp == 0, c.tp, c.pp, grid.tp, grid.pp, grid.dp
    from lezero.parallel.world import resolve
    comm = resolve(comm, "parallel.save_sharded_checkpoint")
    return comm, True, comm.rank, 0, comm.size, 1, 1


def _state(model):
    from lezero.parallel.pipeline.engine import Pipeline
    return model.model_state_dict() if isinstance(model, Pipeline) else model.state_dict()


def _read_manifest(path):
    with open(os.path.join(path, MANIFEST)) as f:
        manifest = json.load(f)
    if manifest.get("format") != FORMAT:
        raise ValueError(f"{path!r} is not a LeZero sharded checkpoint (manifest format "
                         f"{manifest.get('format')!r})")
    return manifest


def _file_name(t, p, version):
    return f"shard-tp{t:03d}-pp{p:03d}-v{version}.npz"


def save_sharded_checkpoint(path, model, extra=None, grid=None, comm=None):
    """Collective: write this rank's shard of ``model`` (and ``extra``, anything
    ``lz.save`` takes, e.g. the optimizer's state) into the folder ``path``."""
    import lezero as lz
    world, writes, t, p, T, P, D = _layout(grid, comm)
    version = None
    if world.rank == 0:
        os.makedirs(path, exist_ok=True)
        try:
            version = _read_manifest(path)["version"] + 1
        except (OSError, ValueError, KeyError):
            version = 1
    version = world.bcast_object(version, 0)
    info = None
    if writes:
        name = _file_name(t, p, version)
        try:
            lz.save({"model": _state(model), "extra": extra or {}}, os.path.join(path, name))
            specs = {k: list(spec) for k, (spec, _) in shard_specs(model).items()}
            info = ("ok", t, p, name, specs)
        except Exception as e:          # tell every rank rather than leave them waiting
            info = ("error", t, p, repr(e), None)
    infos = [i for i in world.allgather_object(info) if i is not None]
    failed = [i for i in infos if i[0] == "error"]
    if failed:
        raise RuntimeError("parallel.save_sharded_checkpoint: " + "; ".join(
            f"shard tp={i[1]} pp={i[2]} failed: {i[3]}" for i in failed))
    error = None
    if world.rank == 0:
        error = _commit(path, version, infos, (T, P, D))
    error = world.bcast_object(error, 0)
    if error is not None:
        raise RuntimeError(f"parallel.save_sharded_checkpoint: rank 0 could not write the "
                           f"manifest of {path!r}: {error}")
    return path


def _commit(path, version, infos, layout):
    """Write the manifest (atomically), then remove other versions' shard files."""
    from lezero.utils.files import atomic_write
    T, P, D = layout
    manifest = {"format": FORMAT, "version": version, "tp": T, "pp": P, "dp": D,
                "files": {f"tp{i[1]}-pp{i[2]}": i[3] for i in infos},
                "specs": {i[3]: i[4] for i in infos}}
    try:
        atomic_write(os.path.join(path, MANIFEST), json.dumps(manifest, indent=1),
                     where="parallel.save_sharded_checkpoint")
    except Exception as e:
        return repr(e)
    keep = set(manifest["files"].values())
    for name in os.listdir(path):
        if name.startswith("shard-") and name.endswith(".npz") and name not in keep:
            os.remove(os.path.join(path, name))
    return None


def load_sharded_checkpoint(path, model, grid=None, comm=None):
    """Load this rank's shard into ``model`` (same layout as saved); returns ``extra``."""
    import lezero as lz
    _, _, t, p, T, P, _ = _layout(grid, comm)
    manifest = _read_manifest(path)
    if (manifest["tp"], manifest["pp"]) != (T, P):
        raise ValueError(f"parallel.load_sharded_checkpoint: {path!r} was saved with "
                         f"tp={manifest['tp']}, pp={manifest['pp']}; this run has tp={T}, "
                         f"pp={P}. Load consolidate_checkpoint(path) with "
                         "load_dense_state_dict instead")
    state = lz.load(os.path.join(path, manifest["files"][f"tp{t}-pp{p}"]))
    from lezero.parallel.pipeline.engine import Pipeline
    if isinstance(model, Pipeline):
        for v in model.local_stage_ids:
            stage = model.stages[str(v)]
            stage.load_state_dict({k: state["model"][k] for k in stage.state_dict()})
    else:
        model.load_state_dict(state["model"])
    return state["extra"]


def consolidate_checkpoint(path):
    """The dense state dict of a sharded checkpoint (one process, no communication)."""
    import lezero as lz
    manifest = _read_manifest(path)
    dense = {}
    for p in range(manifest["pp"]):
        names = [manifest["files"][f"tp{t}-pp{p}"] for t in range(manifest["tp"])]
        shards = [lz.load(os.path.join(path, n))["model"] for n in names]
        specs = manifest["specs"][names[0]]
        for key in shards[0]:
            if key in dense:
                continue                  # a tied weight held by two stages
            if key in specs:
                dense[key] = unshard([s[key] for s in shards], ShardSpec(*specs[key]))
            else:
                dense[key] = shards[0][key]
    return dense
