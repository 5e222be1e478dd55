"""Graph convolutional network (Kipf and Welling, 2017) for node classification.

Two ``GCNConv`` layers with ReLU and dropout between them (the paper's model: 16 hidden
units, dropout 0.5); ``forward(x, edge_index)`` returns class logits per node.  The
propagation matrix is computed (by LeZero operators, so it is traced and exported) once
per graph and reused while ``edge_index`` is the same object.
"""
import lezero.functions as F
from lezero import nn
from lezero.nn.layers.graph import gcn_propagation, on_device_of
from lezero.nn.models.registry import register_model
from lezero.utils.checks import check_int, check_number

__all__ = ["GCN"]


@register_model("gcn")
class GCN(nn.Module):
    """``num_layers`` GCNConv layers: in -> hidden -> ... -> out (logits)."""

    def __init__(self, in_channels, hidden_channels=16, out_channels=2, num_layers=2,
                 dropout=0.5):
        super().__init__()
        check_int("GCN", "num_layers", num_layers, low=1)
        self.dropout = check_number("GCN", "dropout", dropout, low=0, high=1, high_open=True)
        widths = [in_channels] + [hidden_channels] * (num_layers - 1) + [out_channels]
        self.convs = nn.ModuleList([nn.GCNConv(a, b) for a, b in zip(widths, widths[1:])])
        self._norm_cache = (None, None)

    def forward(self, x, edge_index):
        cached_for, norm = self._norm_cache
        if cached_for is not edge_index:
            norm = gcn_propagation(on_device_of(x, edge_index), x.shape[0], where="GCN")
            self._norm_cache = (edge_index, norm)
        for i, conv in enumerate(self.convs):
            x = F.dropout(x, self.dropout, training=self.training)
            x = conv(x, edge_index, norm=norm)
            if i < len(self.convs) - 1:
                x = F.relu(x)
        return x
