"""ONNX's conformance suite (onnx.backend.test) run on zeptograd's ONNX backend.

Every case runs except those in EXCLUDED, each with the reason zeptograd cannot run it at all; EXPECTED_FAILURES
lists the cases that run and fail today, with what is missing, as strict expected failures (a case that starts
passing fails the run until it leaves the list).
"""

from __future__ import annotations

import pytest

pytest.importorskip("onnx")
import onnx.backend.test

from zeptograd.onnx.backend import ZeptogradBackend

# whole models' graphs: the IR round trip of every graph built (conftest) is the IR tests' job
pytestmark = pytest.mark.no_roundtrip

# pattern (a regular expression on the test name) -> why zeptograd cannot run those cases
EXCLUDED: dict[str, str] = {
    # the suite
    r"_cuda$": "the CUDA variants: the suite runs on the CPU",
    r"^test_(bvlc_alexnet|densenet121|inception_v1|inception_v2|resnet50|shufflenet|squeezenet|vgg19|zfnet512)_cpu$": (
        "the real-model suite (whole CNNs on generated inputs, outside the four suites counted; 3 minutes of CI's "
        "CPU): test_models.py and bench/onnx.py run whole models against onnxruntime"
    ),
    r"^test_(string_concat|string_split|regex_full_match|strnormalizer|strnorm_model|ai_onnx_ml_label_encoder)_": (
        "zeptograd has no string dtype"
    ),
    r"^test_(adagrad|adam|momentum|nesterov_momentum|gradient_of)_": "a training-only op (ai.onnx.preview.training)",
    #
    # elementwise, reductions, casts, quantization
    r"^test_(cast|castlike)_.*FNUZ": "zeptograd has no float8e4m3fnuz or float8e5m2fnuz dtype",
    r"^test_(cast|castlike)_.*FLOAT4E2M1": "zeptograd has no float4e2m1 dtype",
    r"^test_cast_e8m0_": "zeptograd has no float8e8m0 dtype",
    r"^test_(de)?quantizelinear_float4e2m1": "zeptograd has no float4e2m1 dtype",
    r"^test_equal_string": "zeptograd has no string dtype",
    r"^test_bernoulli": "the expected values are one draw of numpy's generator, which no other generator reproduces "
    "(the case says so; test_onnx_elementwise.py checks Bernoulli's shape, dtype and frequencies instead)",
    #
    # shapes, indexing, creation, sorting
    #
    # convolutions, pooling, normalization, attention, losses, resizing
    r"^test_training_dropout(_default)?(_mask)?_cpu$": "the expected mask is one draw of numpy's RandomState(seed=0), "
    "which no other generator reproduces (test_nn_ops.py checks training Dropout's scaling and frequencies)",
    #
    # control flow, sequences, recurrent networks, signal processing
    #
}
# pattern -> what zeptograd lacks for it
EXPECTED_FAILURES: dict[str, str] = {
    # elementwise, reductions, casts, quantization
    #
    # shapes, indexing, creation, sorting
    #
    # convolutions, pooling, normalization, attention, losses, resizing
    #
    r"test_attention_4d_(causal_fp16(_expanded)?|gqa_with_past_and_present_fp16_expanded)_cpu$": (
        "float16 rounding: ONNX's reference multiplies the float16 matrices "
        "in float16 steps; zeptograd accumulates in float32, 1-2 float16 ulps off at 1-3 of 192 outputs (rtol 1e-3)"
    ),
    #
    # control flow, sequences, recurrent networks, signal processing
    r"^test_dft_inverse(_opset19)?_cpu$": "the expected output is numpy's single-precision ifft, whose imaginary "
    "parts at the Nyquist bin are 1.9e-7 (its own rounding; exactly 0 for this input) where the case allows 1e-7",
    r"^test_loop16_seq_none_cpu$": "onnx's output comparison calls len() on each tensor of a sequence output and "
    "this case's sequence holds a 0-d tensor (TypeError in onnx.backend.test.runner for any backend)",
    #
    # other ops
    r"^test_image_decoder_": "ImageDecoder: zeptograd decodes no image formats (JPEG, PNG, ...)",
    r"^test_causal_conv_with_state_silu_fp16_expanded_cpu$": "float16 rounding: the expansion's float16 Conv "
    "(Tensor.conv2d) accumulates in float16, ONNX's reference in float32 rounded once: 1 float16 ulp off at 2 of 64 "
    "outputs (rtol 1e-3); the op itself passes",
    #
}

backend_test = onnx.backend.test.BackendTest(ZeptogradBackend, __name__)
for pattern in EXCLUDED:
    backend_test.exclude(pattern)
for pattern in EXPECTED_FAILURES:
    backend_test.xfail(pattern)
globals().update(backend_test.test_cases)
