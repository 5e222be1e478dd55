"""Loss functions, with ``torch.nn.functional``'s names, arguments and defaults.

The family is split by kind; every public loss is re-exported here:

* ``cross_entropy``: cross_entropy (one fused softmax + cross-entropy Function);
* ``nll``: nll_loss; ``class_target``: the class target both share;
* ``regression``: mse_loss, l1_loss, smooth_l1_loss, huber_loss, poisson_nll_loss,
  gaussian_nll_loss;
* ``binary``: binary_cross_entropy, binary_cross_entropy_with_logits, kl_div;
* ``margin``: cosine_embedding_loss, margin_ranking_loss, triplet_margin_loss,
  hinge_embedding_loss;
* ``label_margin``: soft_margin_loss, multilabel_soft_margin_loss, multi_margin_loss,
  multilabel_margin_loss;
* ``ctc``: ctc_loss (forward-backward algorithm in log space).

Every loss takes ``reduction`` ('none', 'mean' or 'sum'; kl_div also 'batchmean') and
validates its arguments before computing anything.  PyTorch's deprecated ``size_average``
and ``reduce`` arguments are not supported: pass arguments after ``target`` by keyword.
Semantic choices are written up in ``docs/losses_and_normalization.md``.
"""
from lezero.functions.loss.binary import (binary_cross_entropy,
                                          binary_cross_entropy_with_logits, kl_div)
from lezero.functions.loss.categorical import cross_entropy
from lezero.functions.loss.ctc import ctc_loss
from lezero.functions.loss.nll import nll_loss
from lezero.functions.loss.label_margin import (multi_margin_loss, multilabel_margin_loss,
                                                multilabel_soft_margin_loss, soft_margin_loss)
from lezero.functions.loss.margin import (cosine_embedding_loss, hinge_embedding_loss,
                                          margin_ranking_loss, triplet_margin_loss)
from lezero.functions.loss.regression import (gaussian_nll_loss, huber_loss, l1_loss,
                                              mse_loss, poisson_nll_loss, smooth_l1_loss)

__all__ = ["cross_entropy", "nll_loss", "mse_loss", "l1_loss", "smooth_l1_loss", "huber_loss",
           "binary_cross_entropy", "binary_cross_entropy_with_logits", "kl_div",
           "cosine_embedding_loss", "margin_ranking_loss", "triplet_margin_loss",
           "hinge_embedding_loss", "poisson_nll_loss", "gaussian_nll_loss", "ctc_loss",
           "soft_margin_loss", "multilabel_soft_margin_loss", "multi_margin_loss",
           "multilabel_margin_loss"]
