"""The model suite: models people train, written with zeptograd's Tensor and nn, each tested against the same
model in torch with the weights copied in (test/test_models.py) and timed by bench/models.py.

>>> from zeptograd.models.gpt import GPT, GPTConfig
>>> GPT(GPTConfig(vocab_size=16, context=8, d_model=8, n_heads=2, n_layers=1)).config.n_layers
1
"""
