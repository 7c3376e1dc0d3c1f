"""ONNX ops: quantization."""

from __future__ import annotations
