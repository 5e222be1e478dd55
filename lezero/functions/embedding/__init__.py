"""Embeddings, with ``torch.nn.functional``'s names and arguments:

* ``lookup``  embedding (rows of a weight by integer index; the gradient scatter-adds)
* ``bag``     embedding_bag (the sum, mean or max of bags of rows)
"""
from lezero.functions.embedding.bag import embedding_bag
from lezero.functions.embedding.lookup import embedding

__all__ = ["embedding", "embedding_bag"]
