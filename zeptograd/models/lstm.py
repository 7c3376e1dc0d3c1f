"""An LSTM language model: a token embedding, a stack of LSTM layers unrolled over the tokens, and a Linear decoder
to the vocabulary's logits. Parameter names are those of a torch module holding `encoder = nn.Embedding(...)`,
`lstm = nn.LSTM(..., batch_first=True)` and `decoder = nn.Linear(...)` (`lstm.weight_ih_l0`, `lstm.weight_hh_l0`,
`lstm.bias_ih_l0`, `lstm.bias_hh_l0`, then `_l1`, ...), so such a module's state dict loads as it is.

>>> from zeptograd import Tensor
>>> model = LSTMLM(LSTMConfig(vocab_size=16, embed_size=8, hidden_size=8, n_layers=2))
>>> model(Tensor([[1, 2, 3]])).shape, model.lstm.weight_ih_l1.shape
((1, 3, 16), (32, 8))
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from zeptograd import Tensor, nn


@dataclass(frozen=True)
class LSTMConfig:
    """The sizes of an LSTM language model: `vocab_size` tokens embedded in `embed_size`, `n_layers` LSTM layers of
    `hidden_size` (the first reads the embeddings, each next one the hidden states of the one before)."""

    vocab_size: int = 10000
    embed_size: int = 256
    hidden_size: int = 256
    n_layers: int = 2


def _uniform(shape: tuple[int, ...], bound: float) -> Tensor:
    """A parameter uniform in [-bound, bound), in a buffer of its own (torch.nn.LSTM's init)."""
    return Tensor.uniform(*shape, low=-bound, high=bound).realize().requires_grad_(True)


class LSTM:
    """A stack of LSTM layers over (batch, time, input_size) inputs, as torch.nn.LSTM(batch_first=True) with the
    states starting at zeros: layer l has `weight_ih_l{l}` (4 * hidden, input), `weight_hh_l{l}` (4 * hidden,
    hidden), `bias_ih_l{l}` and `bias_hh_l{l}` (4 * hidden,), the gates in torch's order i, f, g, o. Returns the
    last layer's hidden states (batch, time, hidden_size)."""

    def __init__(self, input_size: int, hidden_size: int, num_layers: int = 1):
        if min(input_size, hidden_size, num_layers) <= 0:
            raise ValueError(f"LSTM: sizes must be positive, got {input_size}, {hidden_size}, {num_layers}")
        self.input_size, self.hidden_size, self.num_layers = input_size, hidden_size, num_layers
        bound = 1 / math.sqrt(hidden_size)
        for layer in range(num_layers):
            inputs = input_size if layer == 0 else hidden_size
            setattr(self, f"weight_ih_l{layer}", _uniform((4 * hidden_size, inputs), bound))
            setattr(self, f"weight_hh_l{layer}", _uniform((4 * hidden_size, hidden_size), bound))
            setattr(self, f"bias_ih_l{layer}", _uniform((4 * hidden_size,), bound))
            setattr(self, f"bias_hh_l{layer}", _uniform((4 * hidden_size,), bound))

    def __call__(self, x: Tensor) -> Tensor:
        if x.ndim != 3 or x.shape[2] != self.input_size:
            raise ValueError(f"LSTM: expected a (batch, time, {self.input_size}) input, got {x.shape}")
        B, T, _ = x.shape
        H = self.hidden_size
        for layer in range(self.num_layers):
            w_ih, w_hh = getattr(self, f"weight_ih_l{layer}"), getattr(self, f"weight_hh_l{layer}")
            b_ih, b_hh = getattr(self, f"bias_ih_l{layer}"), getattr(self, f"bias_hh_l{layer}")
            # the input's share of the gates for every step at once; the recurrent share one step at a time
            x_gates = x.linear(w_ih.T, b_ih)
            h = Tensor.zeros(B, H, dtype=x.dtype, device=x.device)
            c = Tensor.zeros(B, H, dtype=x.dtype, device=x.device)
            hs = []
            for t in range(T):
                gates = x_gates[:, t] + h.linear(w_hh.T, b_hh)
                i, f, g, o = gates.chunk(4, dim=1)
                c = f.sigmoid() * c + i.sigmoid() * g.tanh()
                h = o.sigmoid() * c.tanh()
                hs.append(h)
            x = Tensor.stack(*hs, dim=1)
        return x


class LSTMLM:
    """(B, T) token ids -> (B, T, vocab_size) logits: embedding, LSTM stack, Linear decoder."""

    def __init__(self, config: LSTMConfig):
        self.config = config
        self.encoder = nn.Embedding(config.vocab_size, config.embed_size)
        self.lstm = LSTM(config.embed_size, config.hidden_size, config.n_layers)
        self.decoder = nn.Linear(config.hidden_size, config.vocab_size)

    def __call__(self, idx: Tensor) -> Tensor:
        if idx.ndim != 2:
            raise ValueError(f"LSTMLM: expected (batch, tokens) ids, got {idx.shape}")
        return self.decoder(self.lstm(self.encoder(idx)))
