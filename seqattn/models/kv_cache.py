"""Decoding one position at a time through a TransformerDecoder, with a key/value cache per
attention layer (``seqattn.nn.KeyValueCache``): the decoder layers run their own forward, and
their attention modules read and extend the caches, so step t costs O(t)."""
from ..nn.attention_cache import KeyValueCache


class DecoderCache:
    """The state of step-by-step decoding through ``decoder`` (a TransformerDecoder in
    evaluation mode) against ``memory`` (B, M, E) for up to ``max_len`` positions."""

    def __init__(self, decoder, memory, memory_key_padding_mask, max_len):
        self.decoder, self.memory, self.max_len = decoder, memory, max_len
        self.memory_key_padding_mask = memory_key_padding_mask
        self.caches = [(KeyValueCache(max_len), KeyValueCache()) for _ in decoder.layers]

    def step(self, x):
        """x (B, 1, E), the embedded input at the next position -> the decoder's output there."""
        return self.decoder(x, self.memory, memory_key_padding_mask=self.memory_key_padding_mask,
                            caches=self.caches)
