"""Attention: scaled_dot_product_attention and multi_head_attention_forward."""
from lezero.functions.attention.scaled_dot_product import *   # noqa: F401,F403
from lezero.functions.attention.scaled_dot_product import __all__  # noqa: F401
