"""Embeddings: embedding and embedding_bag."""
from lezero.functions.embedding.bag import embedding_bag
from lezero.functions.embedding.lookup import embedding

__all__ = ["embedding", "embedding_bag"]
