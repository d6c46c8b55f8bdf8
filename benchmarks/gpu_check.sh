#!/usr/bin/env bash
# One prepared run on a CUDA machine without network access, in under 7 minutes (each step has its own
# timeout): posenc installed from this checkout (no dependencies fetched; wheels carried in .whl/ are
# installed first), the CUDA tests and the kernels' static check, the q+k kernel rows of bench_gpu.py,
# its module rows (the encoder per encoding first, then RotaryEmbedding against Liger-Kernel, flash-attn
# and Hugging Face) and its attention rows (score terms on SDPA and FlexAttention). Everything is written under $OUT (default /tmp/posenc-gpu).
#
#     OUT=/some/dir bash benchmarks/gpu_check.sh
set -u
OUT=${OUT:-/tmp/posenc-gpu}
mkdir -p "$OUT"
PY=${PYTHON:-python3}
export PYTHONUNBUFFERED=1
{
  date -u
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv 2>&1
  "$PY" -c "import sys, torch, triton; print(sys.version.split()[0], 'torch', torch.__version__, 'CUDA', torch.version.cuda, 'triton', triton.__version__, torch.cuda.get_device_name(0))"
} 2>&1 | tee "$OUT/env.txt"

if ls .whl/*.whl >/dev/null 2>&1; then  # peers carried as wheels (liger-kernel …)
  "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    2>&1 | tee "$OUT/wheels.log"
  export PYTHONPATH=/tmp/site
fi
# posenc itself (its entry points serve `posenc bench`); builds the optional C loops where a compiler is
timeout 45 "$PY" -m pip install -q --no-index --no-deps --no-build-isolation -e . >"$OUT/install.log" 2>&1 \
  || echo "pip install -e . failed (see install.log); running from src/" | tee -a "$OUT/env.txt"
export PYTHONPATH=$PWD/src:$PWD/tests${PYTHONPATH:+:$PYTHONPATH}

set -o pipefail
timeout 140 "$PY" -m pytest -q -p no:cacheprovider -rs --durations=15 tests/test_cuda.py \
  tests/backends/test_kernel_static.py 2>&1 | tee "$OUT/tests.log"
echo "pytest exit: $?" | tee -a "$OUT/tests.log"

# the q+k kernels called directly (one launch, or two with tensor positions), then the static report
timeout 50 "$PY" benchmarks/bench_gpu.py --suite qk --rounds 5 2>&1 | tee "$OUT/qk.log"
echo "bench_gpu qk exit: $?" | tee -a "$OUT/qk.log"
timeout 40 "$PY" benchmarks/kernel_static.py --kernels rotate_qk --dtypes bfloat16,float32 2>&1 | tee "$OUT/static.log"

timeout 140 "$PY" benchmarks/bench_gpu.py --suite modules --rounds 5 --compiled none,rope 2>&1 | tee "$OUT/bench.log"
echo "bench_gpu exit: $?" | tee -a "$OUT/bench.log"

timeout 35 "$PY" benchmarks/bench_gpu.py --suite attention --rounds 9 2>&1 | tee "$OUT/attention.log"
echo "bench_gpu attention exit: $?" | tee -a "$OUT/attention.log"
