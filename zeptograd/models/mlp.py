"""An MLP classifier: the input flattened to (batch, features), Linear layers of the given hidden sizes each
followed by an activation (ReLU, exact GELU or tanh-approximated GELU), and a last Linear to the class logits.
Parameter names are those of a torch module holding its Linears in an `nn.ModuleList` named `layers`
(`layers.0.weight`, `layers.0.bias`, ..., the head last), so such a module's state dict loads as it is.

>>> from zeptograd import Tensor
>>> model = MLP(MLPConfig(in_features=12, hidden=(16, 8), num_classes=3))
>>> model(Tensor.ones(2, 3, 4)).shape, len(model.layers)
((2, 3), 3)
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

from zeptograd import Tensor, nn

ACTIVATIONS = ("relu", "gelu", "gelu_tanh")


@dataclass(frozen=True)
class MLPConfig:
    """The sizes of an MLP: `in_features` inputs (after flattening all axes but the batch), one hidden Linear per
    entry of `hidden`, `num_classes` logits. `activation` is "relu", "gelu" (exact, torch's default) or
    "gelu_tanh" (the tanh approximation).

    >>> MLPConfig(in_features=4, hidden=(8,), num_classes=2).activation
    'relu'
    """

    in_features: int = 784
    hidden: tuple[int, ...] = (256, 256)
    num_classes: int = 10
    activation: str = "relu"
    bias: bool = True


class MLP:
    """(batch, ...) inputs of `config.in_features` values each -> (batch, num_classes) logits.

    >>> from zeptograd import Tensor
    >>> MLP(MLPConfig(in_features=4, hidden=(), num_classes=2))(Tensor.zeros(3, 4)).shape
    (3, 2)
    """

    def __init__(self, config: MLPConfig):
        if config.activation not in ACTIVATIONS:
            raise ValueError(f"MLP: activation must be one of {ACTIVATIONS}, got {config.activation!r}")
        self.config = config
        sizes = (config.in_features, *config.hidden, config.num_classes)
        self.layers = [nn.Linear(a, b, bias=config.bias) for a, b in itertools.pairwise(sizes)]

    def _activation(self, x: Tensor) -> Tensor:
        if self.config.activation == "relu":
            return x.relu()
        return x.gelu(approximate="none" if self.config.activation == "gelu" else "tanh")

    def __call__(self, x: Tensor) -> Tensor:
        x = x.flatten(1) if x.ndim > 2 else x
        if x.ndim != 2 or x.shape[1] != self.config.in_features:
            raise ValueError(f"MLP: expected (batch, ...) inputs of {self.config.in_features} values, got {x.shape}")
        for layer in self.layers[:-1]:
            x = self._activation(layer(x))
        return self.layers[-1](x)
