"""ONNX models in zeptograd against onnxruntime (a benchmark, not a test).

    python bench/onnx.py            # ResNet-50 (224 x 224) and a BERT-base-sized encoder (128 tokens), batch 1 and 16
    python bench/onnx.py --quick    # small sizes: a smoke test
    python bench/onnx.py --models bert --batches 1

Needs the test extra (onnx, onnxruntime, torch). Each model is built in torch with random weights
(zeptograd/examples/torch_models.py) and exported to ONNX; zeptograd runs the file with OnnxRunner under TinyJit,
onnxruntime with its CPU provider on every core, on the same input. Columns: the median time of a call (the two
take turns, after three warm-up calls each), the images or sequences per second, zeptograd's throughput over
onnxruntime's (above 1: zeptograd is faster), the largest difference between the outputs, and the seconds of
zeptograd's first call (compiling every kernel).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

import numpy as np

os.environ.setdefault("ZEPTOGRAD_CACHE_DIR", tempfile.mkdtemp(prefix="zeptograd-bench-"))
# run as a script, this file's folder comes first on the path, where `import onnx` (torch's exporter) would find
# this file instead of the onnx package
_here = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [os.path.join(_here, ".."), *(p for p in sys.path if os.path.abspath(p or os.curdir) != _here)]

import torch  # noqa: E402

from zeptograd.examples.onnx_resnet import export, onnxruntime_session, timed, zeptograd_session  # noqa: E402
from zeptograd.examples.torch_models import torch_encoder, torch_resnet  # noqa: E402


def models(quick: bool) -> dict[str, tuple[torch.nn.Module, tuple[int, ...]]]:
    """name -> (torch model, the shape of one item of its input)."""
    torch.manual_seed(0)
    if quick:
        return {
            "resnet50": (torch_resnet("resnet50", width=16), (3, 64, 64)),
            "bert": (torch_encoder(128, 4, 512, 2), (32, 128)),
        }
    return {"resnet50": (torch_resnet("resnet50"), (3, 224, 224)), "bert": (torch_encoder(), (128, 768))}


def main() -> None:
    parser = argparse.ArgumentParser(description="ONNX models: zeptograd against onnxruntime")
    parser.add_argument("--quick", action="store_true", help="small models: a smoke test")
    parser.add_argument("--batches", default="1,16", help="comma-separated batch sizes")
    parser.add_argument("--runs", type=int, default=10, help="timed calls of each library")
    parser.add_argument("--models", default="resnet50,bert", help="comma-separated models (resnet50, bert)")
    args = parser.parse_args()
    batches = [int(b) for b in args.batches.split(",")]
    wanted = args.models.split(",")
    folder = tempfile.mkdtemp(prefix="zeptograd-onnx-")
    print("| model | batch | zeptograd | onnxruntime | items/s | ratio | largest difference | first call |")
    print("|---|---|---|---|---|---|---|---|")
    for name, (model, item) in models(args.quick).items():
        if name not in wanted:
            continue
        rng = np.random.default_rng(0)
        path = export(model, rng.standard_normal((1, *item)).astype(np.float32), os.path.join(folder, f"{name}.onnx"))
        for batch in batches:
            x = rng.standard_normal((batch, *item)).astype(np.float32)
            ours, theirs = zeptograd_session(path), onnxruntime_session(path)
            start = time.perf_counter()
            out = ours(x)
            first = time.perf_counter() - start
            diff = float(np.abs(out - theirs(x)).max())
            t = timed({"zeptograd": ours, "onnxruntime": theirs}, x, args.runs)
            zt, ot = t["zeptograd"], t["onnxruntime"]
            print(
                f"| {name} | {batch} | {zt * 1e3:.2f} ms | {ot * 1e3:.2f} ms | {batch / zt:.1f} | {ot / zt:.2f} "
                f"| {diff:.1e} | {first:.1f} s |",
                flush=True,
            )


if __name__ == "__main__":
    main()
