"""Utilities: gradient checks, graph drawing; serialization and torch import load lazily."""
from lezero.utils.gradient_check import check_double_backward, gradient_check, numerical_grad
from lezero.utils.graph import get_dot_graph, plot_dot_graph

__all__ = ["gradient_check", "numerical_grad", "check_double_backward", "get_dot_graph",
           "plot_dot_graph"]
