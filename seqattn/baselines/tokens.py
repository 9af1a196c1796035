"""Per token: a linear model on the token's own inputs (N -> N regression or labelling).

The features are exactly what the model reads for the token (every channel of ``tokens``:
values, validity and calendar channels; integer ids one-hot), so this is the function class of
the task model's linear path (``TokenModelConfig(linear=True)``) and can start it
(:func:`seqattn.baselines.warm_start`).
"""
from .linear import LinearBaseline, token_inputs, vocab_size_of


class TokenFeatures(LinearBaseline):
    """Ridge (values) or logistic regression (classes) per token on the token's own inputs,
    for targets per token (N -> N); the penalty chosen on validation. Takes no parameters.

    The features of a token are its float channels as they are (tokens (B, N, F)) or its
    integer id one-hot (tokens (B, N); an id past the largest seen in training gets a zero
    row); the rows are the tokens that are not padding.
    """

    kind = "token"

    def prepare(self, train):
        self.vocab_size = vocab_size_of(train)

    def features(self, batch):
        return token_inputs(batch, self.vocab_size)
