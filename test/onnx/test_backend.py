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

# pattern (a regular expression on the test name) -> why zeptograd cannot run those cases
EXCLUDED: dict[str, str] = {
    # the suite
    r"_cuda$": "the CUDA variants: the suite runs on the CPU",
    #
    # elementwise, reductions, casts, quantization
    r"^test_(cast|castlike)_.*FNUZ": "zeptograd has no float8e4m3fnuz or float8e5m2fnuz dtype",
    r"^test_(cast|castlike)_.*INT4": "zeptograd has no int4 or uint4 dtype",
    r"^test_(cast|castlike)_.*INT2": "zeptograd has no int2 or uint2 dtype",
    r"^test_(cast|castlike)_.*FLOAT4E2M1": "zeptograd has no float4e2m1 dtype",
    r"^test_cast_e8m0_": "zeptograd has no float8e8m0 dtype",
    r"^test_(de)?quantizelinear_u?int4": "zeptograd has no int4 or uint4 dtype",
    r"^test_(de)?quantizelinear_u?int2": "zeptograd has no int2 or uint2 dtype",
    r"^test_(de)?quantizelinear_float4e2m1": "zeptograd has no float4e2m1 dtype",
    r"^test_equal_string": "zeptograd has no string dtype",
    r"^test_bernoulli": "the expected values are one draw of numpy's generator, which no other generator reproduces "
    "(the case says so; test_onnx_elementwise.py checks Bernoulli's shape, dtype and frequencies instead)",
    #
    # shapes, indexing, creation, sorting
    #
    # convolutions, pooling, normalization, attention, losses, resizing
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
    r"test_attention_4d_causal_fp16_cpu$": "float16 rounding: ONNX's reference multiplies the float16 matrices "
    "in float16 steps; zeptograd accumulates in float32, 2 float16 ulps off at 3 of 192 outputs (rtol 1e-3)",
    r"test_training_dropout(_default)?(_mask)?_cpu$": "the expected mask is drawn by numpy's RandomState(seed=0); "
    "zeptograd's random generator draws other numbers",
    r"test_(convinteger_with(out)?_padding|(training_)?dropout_(default|zero)(_mask)?_ratio(_mask)?|einsum_scalar"
    r"|gemm_default_scalar_bias)_cpu": (
        "a 0-d input arrives with shape (1,): dtypes.from_numpy's np.ascontiguousarray turns a 0-d array 1-d"
    ),
    #
    # control flow, sequences, recurrent networks, signal processing
    r"^test_dft_inverse(_opset19)?_cpu$": "the expected output is numpy's single-precision ifft, whose imaginary "
    "parts at the Nyquist bin are 1.9e-7 (its own rounding; exactly 0 for this input) where the case allows 1e-7",
    r"^test_loop16_seq_none_cpu$": "onnx's output comparison calls len() on each tensor of a sequence output and "
    "this case's sequence holds a 0-d tensor (TypeError in onnx.backend.test.runner for any backend)",
    #
}

backend_test = onnx.backend.test.BackendTest(ZeptogradBackend, __name__)
for pattern in EXCLUDED:
    backend_test.exclude(pattern)
for pattern in EXPECTED_FAILURES:
    backend_test.xfail(pattern)
globals().update(backend_test.test_cases)
