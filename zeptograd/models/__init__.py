"""The model suite: models people train, written with zeptograd's Tensor and nn, each tested against the same
model in torch with the weights copied in (test/models/test_model_<name>.py) and timed by bench/models.py.

- `gpt`: GPT-2 (pre-norm, GELU, causal attention, tied or untied head), GPT-2's parameter names.
- `llama`: a LLaMA decoder (RMSNorm, rotary embeddings, SwiGLU, grouped-query attention), Meta's names.
- `vit`: a ViT classifier (patch embedding, class token, pre-norm encoder), timm's names.
- `resnet`: ResNet-18/34/50/101/152 with an ImageNet or CIFAR stem, torchvision's names.
- `mlp`: an MLP classifier.
- `lstm`: an LSTM language model, torch.nn.LSTM's names.
- `unet`: a small UNet (GroupNorm convolution blocks, transposed convolutions, skip connections).
- `sampling`: the next token from a language model's logits (greedy, temperature, top-k, top-p, seeded).
- `tokenizer`: text to ids and back with a GGUF file's tokenizer (SentencePiece BPE, GPT-2's byte-level BPE).
- `generation`: text from a language model, a token at a time (`generate`).
- `tiny_gguf`: a tiny random LLaMA written to a GGUF file, for examples that run offline.

>>> from zeptograd.models.gpt import GPT, GPTConfig
>>> GPT(GPTConfig(vocab_size=16, context=8, d_model=8, n_heads=2, n_layers=1)).config.n_layers
1
"""
