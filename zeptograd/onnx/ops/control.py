"""ONNX ops: control."""

from __future__ import annotations
