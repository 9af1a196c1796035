"""Which keyword arguments a model's forward accepts: the one rule that ``fit`` (training) and
``predict`` (seqattn.data.model_call) both follow, so a model gets the same ``coords`` and
``structure`` in training as at prediction time."""
import inspect


def takes_keyword(model, name):
    """Whether `model` (for a Module, its ``forward``; else the callable itself) accepts a
    keyword argument `name`: a parameter of that name, or ``**kwargs``."""
    function = getattr(model, "forward", model)
    try:
        parameters = inspect.signature(function).parameters.values()
    except (TypeError, ValueError):  # no signature to read (a builtin): assume the protocol
        return True
    return any(p.name == name and p.kind != p.POSITIONAL_ONLY or p.kind == p.VAR_KEYWORD
               for p in parameters)
