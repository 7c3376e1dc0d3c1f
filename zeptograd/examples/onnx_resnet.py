"""Run an ONNX model in zeptograd: a ResNet-18 exported from PyTorch, checked against onnxruntime, both timed.

    python -m zeptograd.examples.onnx_resnet               # ResNet-18 at 224 x 224, batch 1
    python -m zeptograd.examples.onnx_resnet --batch 8 --size 160

Needs the interop extra (`pip install -e ".[interop]"`: onnx, onnxruntime, torch). The ResNet is torchvision's
architecture (zeptograd/examples/torch_models.py) with random weights, exported by `torch.onnx.export` to a file;
zeptograd loads the file with `OnnxRunner` and runs it under TinyJit; onnxruntime runs the same file on the same
input. The script prints both outputs' largest difference and the median time of a call of each.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from zeptograd import Tensor, TinyJit
from zeptograd.onnx import OnnxRunner


def export(model: Any, example: np.ndarray, path: str) -> str:
    """Export torch module `model` (in eval mode) to an ONNX file at `path`, with input "x" and output "y" whose
    first axis (the batch) is dynamic."""
    import torch

    model.eval()
    axes = {"x": {0: "batch"}, "y": {0: "batch"}}
    # torch's fused inference path of a TransformerEncoderLayer is one op that the exporter cannot write
    fastpath = torch.backends.mha.get_fastpath_enabled()
    torch.backends.mha.set_fastpath_enabled(False)
    try:
        with torch.no_grad():
            torch.onnx.export(
                model, (torch.from_numpy(example),), path, dynamo=False, input_names=["x"], output_names=["y"],
                dynamic_axes=axes,
            )  # fmt: skip
    finally:
        torch.backends.mha.set_fastpath_enabled(fastpath)
    return path


def zeptograd_session(path: str) -> Callable[[np.ndarray], np.ndarray]:
    """The ONNX model at `path` run by zeptograd under TinyJit: a function of a numpy input to a numpy output."""
    runner = OnnxRunner(path)
    step = TinyJit(lambda x: runner({"x": x})["y"])
    return lambda x: step(Tensor(x)).numpy()


def onnxruntime_session(path: str) -> Callable[[np.ndarray], np.ndarray]:
    """The ONNX model at `path` run by onnxruntime on the CPU (every core)."""
    import onnxruntime

    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = os.cpu_count() or 1
    session = onnxruntime.InferenceSession(path, options, providers=["CPUExecutionProvider"])
    return lambda x: session.run(["y"], {"x": x})[0]


def timed(sessions: dict[str, Callable[[np.ndarray], np.ndarray]], x: np.ndarray, runs: int) -> dict[str, float]:
    """Median seconds of a call of each session, the sessions taking turns (each warmed up first)."""
    for run in sessions.values():
        for _ in range(3):  # zeptograd: compile, capture, replay
            run(x)
    times: dict[str, list[float]] = {name: [] for name in sessions}
    for _ in range(runs):
        for name, run in sessions.items():
            start = time.perf_counter()
            run(x)
            times[name].append(time.perf_counter() - start)
    return {name: statistics.median(t) for name, t in times.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--size", type=int, default=224, help="image height and width")
    parser.add_argument("--runs", type=int, default=10, help="timed calls of each")
    args = parser.parse_args()

    import torch

    from zeptograd.examples.torch_models import torch_resnet

    torch.manual_seed(0)
    x = np.random.default_rng(0).standard_normal((args.batch, 3, args.size, args.size)).astype(np.float32)
    path = export(torch_resnet("resnet18"), x, os.path.join(tempfile.mkdtemp(), "resnet18.onnx"))
    print(f"exported {path} ({os.path.getsize(path) / 1e6:.1f} MB)")
    sessions = {"zeptograd": zeptograd_session(path), "onnxruntime": onnxruntime_session(path)}
    ours, theirs = sessions["zeptograd"](x), sessions["onnxruntime"](x)
    diff = float(np.abs(ours - theirs).max())
    print(f"output {ours.shape}, largest difference from onnxruntime {diff:.2e}")
    print(f"matches onnxruntime: {'yes' if np.allclose(ours, theirs, rtol=1e-3, atol=1e-3) else 'NO'}")
    for name, seconds in timed(sessions, x, args.runs).items():
        print(f"{name:12s} {seconds * 1e3:8.2f} ms per call ({args.batch / seconds:.1f} images/s)")


if __name__ == "__main__":
    main()
