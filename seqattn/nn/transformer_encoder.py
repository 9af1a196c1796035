"""A stack of encoder layers with an optional final norm (torch names: layers.0..., norm)."""
import copy

from .containers import ModuleList
from .dropout import reseed_dropouts
from .module import Module


class TransformerEncoder(Module):
    """A stack of ``num_layers`` copies of an encoder layer, optionally followed by a norm.

    src (B, N, E) -> (B, N, E). The copies are deep copies (identical initial weights, as in
    torch); each copy's dropout draws its own masks.

    Parameters
    ----------
    encoder_layer : TransformerEncoderLayer
        The layer to copy.
    num_layers : int
        How many copies.
    norm : Module, optional
        Applied to the last layer's output (a :class:`LayerNorm` for pre-norm stacks).
    """

    def __init__(self, encoder_layer, num_layers, norm=None):
        super().__init__()
        layers = [copy.deepcopy(encoder_layer) for _ in range(num_layers)]
        for i, layer in enumerate(layers):
            reseed_dropouts(layer, i)
        self.layers = ModuleList(layers)
        self.norm = norm

    def forward(self, src, mask=None, src_key_padding_mask=None, is_causal=False,
                structure=None):
        """``structure`` feeds every layer's structured biases (each layer its own tables)."""
        x = src
        for layer in self.layers:
            x = layer(x, src_key_padding_mask=src_key_padding_mask, src_mask=mask,
                      is_causal=is_causal, structure=structure)
        return x if self.norm is None else self.norm(x)

