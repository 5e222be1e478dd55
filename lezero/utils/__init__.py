"""Utilities: gradient checks, graph drawing, the host-memory setting, the Function timer,
training curves (``plot_history``, matplotlib imported only when drawing);
serialization and torch import load lazily."""
from lezero.utils.gradient_check import check_double_backward, gradient_check, numerical_grad
from lezero.utils.graph import get_dot_graph, plot_dot_graph
from lezero.utils.host_memory import keep_freed_memory
from lezero.utils.plotting import plot_history
from lezero.utils.profiling import TimerHook

__all__ = ["gradient_check", "numerical_grad", "check_double_backward", "get_dot_graph",
           "plot_dot_graph", "keep_freed_memory", "TimerHook", "plot_history"]
