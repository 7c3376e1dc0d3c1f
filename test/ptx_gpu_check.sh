#!/bin/sh
# The PTX device's check on a machine with an NVIDIA GPU (driver >= CUDA 12; no NVRTC needed for PTX itself).
# Run from the repository root: sh test/ptx_gpu_check.sh   (about two minutes with 16 cores)
# 1. test_ptx.py: ptxas accepts every kernel of the op set (sm_80, sm_90), and the GPU tests against numpy
#    (and against the CUDA C device when NVRTC is there);
# 2. test_backends.py: random programs against numpy and bits against the PYTHON reference, on PTX;
# 3. the elementwise and reduce op suites with PTX as the default device.
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null
export PYTHONPATH=.
python -m pytest -q -n 16 -p no:cacheprovider test/test_ptx.py test/test_backends.py -k "PTX or ptx or assemble or shape or plans" 2>&1 | tail -25
DEVICE=PTX python -m pytest -q -n 16 -p no:cacheprovider test/test_tensor_elementwise.py test/test_tensor_reduce.py 2>&1 | tail -40
