#!/usr/bin/env bash
# `make test-gpu`: LeZero on a real NVIDIA GPU through CuPy, in under 8 minutes.
#
#   1. finds the GPU and the CUDA version its driver supports (nvidia-smi); without a GPU
#      it says so and exits 0 (the strict device runs the GPU code paths in `make test`);
#   2. installs cupy-cuda13x (cupy-cuda12x on a CUDA 12 driver) into .venv when missing;
#   3. runs the conformance suite on CuPy (LEZERO_BACKEND=cupy pytest --pyargs
#      lezero.testing.conformance), then the gpu-marked tests (pytest -m gpu tests);
#   4. trains ResNet-18 a few steps under autocast float16 + GradScaler on the GPU;
#   5. prints one summary table (stage, result, seconds); exits 1 if a stage failed.
#
# Environment: PY (the interpreter, default .venv/bin/python), GPU_CHECK_BACKEND (default
# cupy; `strict` runs the stages on the strict device, without a GPU: how the script is
# tested), GPU_CHECK_STAGES (default "conformance gpu_suite resnet"), GPU_CHECK_BATCH (the
# ResNet-18 batch, default 16).
set -u
cd "$(dirname "$0")/.."
PY=${PY:-.venv/bin/python}
BACKEND=${GPU_CHECK_BACKEND:-cupy}
STAGES=${GPU_CHECK_STAGES:-conformance gpu_suite resnet}
SUMMARY=$(mktemp)
trap 'rm -f "$SUMMARY"' EXIT
STATUS=0

# ----- 1. is there a GPU? ------------------------------------------------------------------
cuda_major() {
    # The CUDA version the driver supports, from nvidia-smi's header ("CUDA Version: 13.0").
    nvidia-smi 2>/dev/null | sed -n 's/.*CUDA Version: *\([0-9][0-9]*\)\..*/\1/p' | head -n 1
}

if [ "$BACKEND" = cupy ]; then
    if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L 2>/dev/null | grep -q "^GPU"; then
        echo "gpu_check: no NVIDIA GPU present (nvidia-smi is missing or lists no GPU)."
        echo "gpu_check: nothing to run on CuPy here; \`make test\` runs the GPU code paths"
        echo "gpu_check: on the strict device (docs/backends.md). Exiting 0."
        exit 0
    fi
    MAJOR=$(cuda_major)
    case "$MAJOR" in
        13) WHEEL=cupy-cuda13x ;;
        12) WHEEL=cupy-cuda12x; echo "gpu_check: the driver supports CUDA 12, not 13: using $WHEEL" ;;
        *) echo "gpu_check: the driver reports CUDA '${MAJOR:-?}'; cupy-cuda13x needs CUDA 13"; exit 1 ;;
    esac
    nvidia-smi -L
    # ----- 2. CuPy --------------------------------------------------------------------------
    if ! "$PY" -c "import cupy" >/dev/null 2>&1; then
        echo "gpu_check: installing $WHEEL into $(dirname "$(dirname "$PY")")"
        "$PY" -m pip install -q "$WHEEL" || { echo "gpu_check: pip install $WHEEL failed"; exit 1; }
    fi
fi

# ----- 3-4. the stages ------------------------------------------------------------------------
run_stage() {
    # run_stage NAME SECONDS CMD...: run CMD with a time limit, record its last summary line.
    local name=$1 limit=$2
    shift 2
    local start out rc
    start=$(date +%s)
    out=$(timeout "$limit" "$@" 2>&1)
    rc=$?
    printf '%s\n' "$out" | tail -n 25
    local last
    last=$(printf '%s\n' "$out" | grep -E "passed|failed|error|loss|no tests ran" | tail -n 1)
    [ $rc -eq 124 ] && last="timed out after ${limit} s"
    [ $rc -ne 0 ] && STATUS=1
    printf '%s|%s|%s|%s\n' "$name" "$([ $rc -eq 0 ] && echo ok || echo FAILED)" \
        "$(echo "$last" | sed 's/=//g; s/^ *//; s/ *$//' | cut -c1-70)" \
        "$(( $(date +%s) - start ))" >> "$SUMMARY"
}

RESNET_STEPS='
import os, numpy as np, lezero as lz, lezero.functions as F
from lezero import amp, cuda, optim
from lezero.nn import models
lz.manual_seed(0)
model = models.get_model("resnet18", num_classes=10).to_gpu()
opt = optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
scaler = amp.GradScaler(init_scale=2.0 ** 10)
rng, batch = np.random.default_rng(0), int(os.environ.get("GPU_CHECK_BATCH", "16"))
x = cuda.as_cupy(rng.standard_normal((batch, 3, 32, 32)).astype(np.float32))
t = cuda.as_cupy(rng.integers(0, 10, batch))
losses = []
for step in range(6):
    with amp.autocast("float16"):
        loss = F.cross_entropy(model(x), t)
    opt.zero_grad()
    scaler.scale(loss).backward()
    scaler.step(opt)
    scaler.update()
    losses.append(loss.item())
print(" ".join(f"{v:.3f}" for v in losses))
print(f"loss {losses[0]:.3f} -> {losses[-1]:.3f} in {len(losses)} steps on {cuda.device_of(x)}")
assert all(np.isfinite(losses)) and losses[-1] < losses[0], losses
'

for stage in $STAGES; do
    case "$stage" in
        conformance)
            run_stage "conformance suite ($BACKEND)" 240 env LEZERO_BACKEND="$BACKEND" \
                "$PY" -m pytest -q -p no:randomly -n 0 --pyargs lezero.testing.conformance ;;
        gpu_suite)
            run_stage "gpu-marked tests" 300 "$PY" -m pytest -q -p no:randomly -n 4 -m gpu \
                --ignore=tests/parallel tests ;;
        resnet)
            run_stage "ResNet-18 autocast float16" 120 env LEZERO_BACKEND="$BACKEND" \
                "$PY" -c "$RESNET_STEPS" ;;
        *) echo "gpu_check: unknown stage '$stage'"; exit 2 ;;
    esac
done

# ----- 5. the summary -------------------------------------------------------------------------
echo
echo "gpu_check summary (backend $BACKEND)"
printf '| %-30s | %-6s | %-70s | %5s |\n' stage result detail s
printf '|%s|%s|%s|%s|\n' "$(printf -- '-%.0s' {1..32})" "--------" \
    "$(printf -- '-%.0s' {1..72})" "-------"
while IFS='|' read -r name result detail secs; do
    printf '| %-30s | %-6s | %-70s | %5s |\n' "$name" "$result" "$detail" "$secs"
done < "$SUMMARY"
exit $STATUS
