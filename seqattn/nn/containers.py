"""Containers that compose modules so that a model needs no hand-written backward."""
from .module import Module


class ModuleList(Module):
    """A list of modules, named "0", "1", ... in the state dict (torch's ``layers.0.``); the
    module that owns it decides how to run them.

    Parameters
    ----------
    modules : iterable of Module, default ()
        The modules, in order.
    """

    def __init__(self, modules=()):
        super().__init__()
        for i, m in enumerate(modules):
            setattr(self, str(i), m)

    def __iter__(self):
        return iter(self._modules.values())

    def __len__(self):
        return len(self._modules)

    def __getitem__(self, i):
        return list(self._modules.values())[i]


class Sequential(ModuleList):
    """Modules applied one after the other, named "0", "1", ... as in torch.nn.Sequential.

    Parameters
    ----------
    *modules : Module
        The modules, in the order they run.
    """

    def __init__(self, *modules):
        super().__init__(modules)

    def forward(self, x):
        for m in self:
            x = m(x)
        return x


class Residual(Module):
    """``y = x + inner(x)``; the gradient flows through both branches and is summed.

    Parameters
    ----------
    inner : Module
        The branch added to its input; its output has the input's shape.
    """

    def __init__(self, inner):
        super().__init__()
        self.inner = inner

    def forward(self, x):
        return x + self.inner(x)
