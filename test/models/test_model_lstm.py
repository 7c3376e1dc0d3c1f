"""The LSTM language model of the model suite against the same model in torch (torch.nn.LSTM, batch_first), weights
copied in: outputs, gradients, and the losses of five optimizer steps, at one and two layers, with SGD and Adam."""

from __future__ import annotations

import numpy as np
import pytest
from model_oracle import check_against_torch, cross_entropy, torch

from zeptograd.helpers import Context
from zeptograd.models.lstm import LSTMLM, LSTMConfig

tnn = torch.nn
# a model's graphs are thousands of nodes: the pyrender round trip of every graph built (conftest) is the IR tests'
pytestmark = pytest.mark.no_roundtrip


class TorchLSTMLM(tnn.Module):
    def __init__(self, c: LSTMConfig):
        super().__init__()
        self.encoder = tnn.Embedding(c.vocab_size, c.embed_size)
        self.lstm = tnn.LSTM(c.embed_size, c.hidden_size, num_layers=c.n_layers, batch_first=True)
        self.decoder = tnn.Linear(c.hidden_size, c.vocab_size)

    def forward(self, idx):
        out, _ = self.lstm(self.encoder(idx))
        return self.decoder(out)


def _check(config: LSTMConfig, batch: int = 2, tokens: int = 8, **kw) -> None:
    torch.manual_seed(0)
    twin = TorchLSTMLM(config)
    rng = np.random.default_rng(0)
    ids = rng.integers(0, config.vocab_size, (batch, tokens)).astype(np.int32)
    targets = rng.integers(0, config.vocab_size, (batch, tokens)).astype(np.int32)
    check_against_torch(LSTMLM(config), twin, (ids,), cross_entropy, targets, **kw)


def _config(layers: int) -> LSTMConfig:
    # one width for the embedding and every layer: the layers' kernels are alike, compiled once for all tests
    return LSTMConfig(vocab_size=24, embed_size=12, hidden_size=12, n_layers=layers)


@pytest.mark.parametrize("layers", [1, 2])
def test_lstm_matches_torch_sgd(layers: int):
    _check(_config(layers))


def test_lstm_matches_torch_adam():
    _check(_config(2), optimizer="adam")


def test_lstm_matches_torch_unoptimized():
    with Context(NOOPT=1):
        _check(_config(2))
