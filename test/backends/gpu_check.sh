#!/bin/sh
# Everything this project checks on a machine with an NVIDIA GPU, in one go (the device tool's lease is short):
#   sh test/backends/gpu_check.sh [OUTDIR]     (from the repository root; about 5 minutes with 16 cores)
# 1. the op suite, test_cuda.py and test_wmma.py (tensor cores on CUDA and PTX) on the CUDA device;
# 2. test/backends/ptx_gpu_check.sh (the PTX device); 3. the elementwise and reduce suites and test_triton.py on TRITON;
# 4. bench/cuda.py --sweep (pass the GPU's bandwidth with PEAK_GBS, default 3350: an H100 SXM); 5. on an H100 or
# H200, bench/cuda.py --wgmma (the warpgroup MMA's layouts against numpy, x @ y in each, and its shapes and plans),
# and the tensor-core tests with WGMMA_ROW_MAJOR=1 (the wgmma that reads row-major operands as they are).
# Each stage has its own time limit so that a slow one cannot starve the others; the logs go to OUTDIR.
out=${1:-/tmp/zg_gpu_check}
mkdir -p "$out"
export PYTHONPATH=. PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1 | tee "$out/machine.txt"
python3 -c "import sys, numpy, torch, triton; print(sys.version.split()[0], numpy.__version__, torch.__version__, triton.__version__)" 2>&1 | tee -a "$out/machine.txt"
echo "== CUDA op suite"
DEVICE=CUDA timeout ${CUDA_S:-75} python3 -m pytest -n 16 -rfE -p no:cacheprovider -W ignore test/ops/test_tensor_*.py \
    test/backends/test_cuda.py test/backends/test_wmma.py >"$out/cuda_suite.log" 2>&1
tail -15 "$out/cuda_suite.log"
echo "== PTX"
timeout ${PTX_S:-60} sh test/backends/ptx_gpu_check.sh >"$out/ptx.log" 2>&1
tail -8 "$out/ptx.log"
echo "== TRITON"
DEVICE=TRITON timeout ${TRITON_S:-90} python3 -m pytest -n 16 -rfE -p no:cacheprovider -W ignore \
    test/ops/test_tensor_elementwise.py test/ops/test_tensor_reduce.py test/backends/test_triton.py >"$out/triton.log" 2>&1
tail -25 "$out/triton.log"
echo "== bench/cuda.py"
timeout ${BENCH_S:-100} python3 bench/cuda.py --sweep --peak-gbs "${PEAK_GBS:-3350}" 2>&1 | tee "$out/bench.log"
echo "== bench/cuda.py --wgmma"
timeout ${WGMMA_S:-150} python3 bench/cuda.py --wgmma 2>&1 | tee "$out/wgmma.log"
echo "== tensor cores with WGMMA_ROW_MAJOR=1"
WGMMA_ROW_MAJOR=1 DEVICE=CUDA timeout ${ROWS_S:-60} python3 -m pytest -n 16 -rfE -p no:cacheprovider -W ignore \
    test/backends/test_wmma.py test/backends/test_wgmma.py test/backends/test_cuda.py >"$out/row_major.log" 2>&1
tail -15 "$out/row_major.log"
