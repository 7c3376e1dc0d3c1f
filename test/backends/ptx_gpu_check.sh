#!/bin/sh
# The PTX device's check on a machine with an NVIDIA GPU (driver >= CUDA 12; PTX itself needs no NVRTC).
# Run from the repository root: sh test/backends/ptx_gpu_check.sh   (about a minute with 16 cores)
# 1. test_ptx.py: ptxas accepts every kernel of the op set (sm_80, sm_90), and the GPU tests against numpy (and
#    against the CUDA C device where NVRTC is there); test_backends.py on PTX: random programs against numpy and
#    bits against the PYTHON reference;
# 2. the elementwise and reduce op suites with PTX as the default device.
# (pyproject's addopts has -q already: no second -q, or pytest drops the pass/fail count line)
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null
export PYTHONPATH=.
python -m pytest -n 16 -rfE -p no:cacheprovider -W ignore test/backends/test_ptx.py test/backends/test_backends.py -k "ptx" 2>&1 | tail -25
DEVICE=PTX python -m pytest -n 16 -rfE -p no:cacheprovider -W ignore test/ops/test_tensor_elementwise.py \
    test/ops/test_tensor_reduce.py 2>&1 | tail -40
