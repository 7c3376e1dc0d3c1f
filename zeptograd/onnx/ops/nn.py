"""ONNX ops: nn."""

from __future__ import annotations
