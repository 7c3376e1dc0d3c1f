"""The examples: what the symbolic demo prints is right (checked by brute force); the digits example reaches 97%
(the GPT main job is tested, shortened, in test_gpt_example.py)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from zeptograd.dtype import dtypes
from zeptograd.examples import symbolic as demo
from zeptograd.models.tiny_gguf import tiny_vocabulary
from zeptograd.uop import Ops, UOp


def test_demo_simplification_is_exact():
    offset, in_bounds = demo.build()
    simple_offset, simple_bounds = offset.simplify(), in_bounds.simplify()
    r = next(u for u in offset.toposort() if u.op is Ops.RANGE)
    n = next(u for u in offset.toposort() if u.op is Ops.DEFINE_VAR)
    for rv in range(24):
        for nv in range(1, 9):
            binding = {r: UOp.const(dtypes.index, rv), n: UOp.const(dtypes.index, nv)}
            # brute force: the index arithmetic by hand, in Python
            flat = ((rv // 6) * 6 + rv % 6) * nv + nv * 2 - nv * 2
            expected = (flat + nv * 4) // nv
            assert offset.substitute(binding).simplify().arg == expected
            assert simple_offset.substitute(binding).simplify().arg == expected
            assert simple_bounds.substitute(binding).simplify().arg == (4 <= expected < 28)
    assert len(simple_offset.toposort()) < len(offset.toposort()) // 3


def test_demo_runs_and_prints_before_and_after():
    out = subprocess.run(
        [sys.executable, "-m", "zeptograd.examples.symbolic"], capture_output=True, text=True, check=True
    ).stdout
    assert "before (19 nodes)" in out and "after (4 nodes): r0+4" in out and "after (1 nodes): True" in out
    assert "rules applied:" in out


def test_fused_main_job_prints_one_kernel_its_source_and_timings():
    out = subprocess.run(
        [sys.executable, "-m", "zeptograd.examples.fused"], capture_output=True, text=True, check=True
    ).stdout
    assert "kernels launched: 1" in out and "matches numpy: yes" in out
    assert "void E_4194304(" in out and "for (" in out
    assert "zeptograd " in out and "numpy " in out


def test_mlp_example_trains_saves_and_loads():
    out = subprocess.run(
        [sys.executable, "-m", "zeptograd.examples.mlp", "--steps", "150"], capture_output=True, text=True, check=True
    ).stdout
    losses = [float(line.split()[-1]) for line in out.splitlines() if line.startswith("step")]
    assert losses[-1] < losses[0] / 3
    accuracy = float(next(line for line in out.splitlines() if line.startswith("test accuracy")).split()[-1])
    assert accuracy > 0.9
    assert out.splitlines()[-1] == "the loaded model predicts the same: True"


def test_digits_quick_example_reaches_97_percent():
    # the quick example as the README runs it: the last line is the test accuracy and the time taken
    run = subprocess.run(
        [sys.executable, "-m", "zeptograd.examples.digits"], capture_output=True, text=True, check=True
    )
    last = run.stdout.strip().splitlines()[-1]
    assert last.startswith("test accuracy: 0.") and last.endswith(" s)")
    assert float(last.split()[2]) >= 0.97
    assert "loss=" in run.stderr  # the tqdm progress bar shows the loss


def test_onnx_resnet_example_matches_onnxruntime():
    pytest.importorskip("onnxruntime")
    pytest.importorskip("torch")
    out = subprocess.run(
        [sys.executable, "-m", "zeptograd.examples.onnx_resnet", "--size", "64", "--runs", "2"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert "matches onnxruntime: yes" in out
    assert "zeptograd " in out and "onnxruntime " in out and "ms per call" in out


def test_llama_example_generates_offline_from_a_tiny_gguf():
    run = subprocess.run(
        [sys.executable, "-m", "zeptograd.examples.llama", "--tokens", "6", "--prompt", "Hello world"],
        capture_output=True,
        text=True,
        check=True,
    )
    lines = run.stdout.splitlines()
    assert lines[0].startswith("model: tiny-llama.gguf: dim 64, 2 layers, 4 heads (2 key/value)")
    # both words are pieces of the tiny vocabulary: the prompt is the BOS id and theirs
    tokens = tiny_vocabulary()[0]
    assert lines[2] == f"prompt: 3 tokens [1, {tokens.index('▁Hello')}, {tokens.index('▁world')}]"
    assert lines[3].startswith("Hello world")
    assert lines[-1].startswith("6 tokens in ") and "tokens/s" in lines[-1]
