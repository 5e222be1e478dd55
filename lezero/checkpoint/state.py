"""State around a recomputation: the random generators and the modules' buffers."""
import functools
import sys

from lezero.backends import devices_in_use


def _generator_module():
    """The module holding LeZero's process generator (the one ``lz.manual_seed`` seeds),
    wherever the core keeps it."""
    import lezero
    return sys.modules[lezero.manual_seed.__module__]


_random = _generator_module()


class RngState:
    """The process generator's state; on each device in use that has a generator, also a
    per-block seed (a device generator's state cannot always be copied -- CuPy's cannot --
    so a checkpointed block draws from its own seeded one)."""

    def __init__(self):
        self.numpy = _random.get_rng_state()
        self.device_seeds = {}
        for backend in devices_in_use():
            generator = _peek_device_rng(backend.name)
            if generator is not None:
                self.device_seeds[backend.name] = (backend, int(generator.integers(2 ** 62)))


class replaying:
    """Context: the generators as they were when the block first ran (``rewind``), or
    only the block's own device generators (the first run)."""

    def __init__(self, state, rewind=True):
        self.state, self.rewind = state, rewind

    def __enter__(self):
        if self.state is None:
            return
        if self.rewind:
            self.now = _random.get_rng_state()
            _random.set_rng_state(self.state.numpy)
        self.devices = {name: _random.swap_device_rng(name, backend.rng(seed))
                        for name, (backend, seed) in self.state.device_seeds.items()}

    def __exit__(self, *exc):
        if self.state is not None:
            if self.rewind:
                _random.set_rng_state(self.now)
            for name, previous in self.devices.items():
                _random.swap_device_rng(name, previous)
        return False


def _peek_device_rng(name):
    """The device ``name``'s process generator, None when none was made (making one here
    would draw from NumPy's and shift its stream)."""
    generator = _random.swap_device_rng(name, None)
    if generator is not None:
        _random.swap_device_rng(name, generator)
    return generator


def is_module(obj):
    return hasattr(obj, "named_buffers") and hasattr(obj, "modules")


def modules_of(fn, args, kwargs):
    """Modules the block can reach: fn itself, a bound method's owner, wrappers, closure
    cells, globals the code names, and the arguments (for restoring their buffers)."""
    found, seen = [], set()

    def visit(obj, depth):
        if obj is None or depth > 4 or id(obj) in seen:
            return
        seen.add(id(obj))
        if is_module(obj):
            found.append(obj)
            return
        if isinstance(obj, (list, tuple)):
            for o in obj:
                visit(o, depth + 1)
            return
        if isinstance(obj, functools.partial):
            visit(obj.func, depth + 1)
            visit(obj.args, depth + 1)
        for attr in ("__self__", "__wrapped__", "module"):
            visit(getattr(obj, attr, None), depth + 1)
        for cell in getattr(obj, "__closure__", None) or ():
            try:
                visit(cell.cell_contents, depth + 1)
            except ValueError:                       # an empty cell
                pass
        code, env = getattr(obj, "__code__", None), getattr(obj, "__globals__", None)
        if code is not None and env is not None:
            for name in code.co_names:
                visit(env.get(name), depth + 1)

    visit(fn, 0)
    for a in list(args) + list(kwargs.values()):
        visit(a, 1)
    return found


def snapshot_buffers(modules):
    """(module, name, array, copy) for every buffer of the modules."""
    out, seen = [], set()
    for m in modules:
        for sub in m.modules():
            for name, buf in sub.named_buffers(recurse=False):
                if buf is not None and id(buf) not in seen:
                    seen.add(id(buf))
                    out.append((sub, name, buf, buf.copy()))
    return out


def restore_buffers(snapshot):
    for module, name, buf, saved in snapshot:
        buf[...] = saved
        setattr(module, name, buf)
