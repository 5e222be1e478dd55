"""Graph attention network (Velickovic et al., 2018) for node classification.

The paper's transductive model: a ``GATConv`` with ``heads`` attention heads of
``hidden_channels`` each (concatenated, ELU), then one with ``out_heads`` heads averaged
into the class logits; dropout 0.6 on the inputs of both layers and on the attention
coefficients.  ``forward(x, edge_index)`` returns logits per node.
"""
import lezero.functions as F
from lezero import nn
from lezero.nn.models.registry import register_model
from lezero.utils.checks import check_number

__all__ = ["GAT"]


@register_model("gat")
class GAT(nn.Module):
    """Two GATConv layers (8 heads x 8 units, then 1 head, in the paper)."""

    def __init__(self, in_channels, hidden_channels=8, out_channels=2, heads=8, out_heads=1,
                 dropout=0.6):
        super().__init__()
        self.dropout = check_number("GAT", "dropout", dropout, low=0, high=1, high_open=True)
        self.conv1 = nn.GATConv(in_channels, hidden_channels, heads=heads, dropout=dropout)
        self.conv2 = nn.GATConv(hidden_channels * heads, out_channels, heads=out_heads,
                                concat=False, dropout=dropout)

    def forward(self, x, edge_index):
        x = F.dropout(x, self.dropout, training=self.training)
        x = F.elu(self.conv1(x, edge_index))
        x = F.dropout(x, self.dropout, training=self.training)
        return self.conv2(x, edge_index)
