"""tools/gpu_check.sh (`make test-gpu`): without a GPU it says so and exits 0; its
ResNet-18 autocast stage and summary table, run on the strict device."""
import os
import stat
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(ROOT, "tools", "gpu_check.sh")


def _run(env_extra, path):
    env = {**os.environ, "PATH": path, "PY": sys.executable, **env_extra}
    env.pop("LEZERO_BACKEND", None)
    return subprocess.run(["bash", SCRIPT], env=env, capture_output=True, text=True,
                          timeout=120)


def _fake_nvidia_smi(tmp_path, body):
    fake = tmp_path / "nvidia-smi"
    fake.write_text("#!/bin/sh\n" + body + "\n")
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    return f"{tmp_path}:/usr/bin:/bin"


def test_without_nvidia_smi_it_says_no_gpu_and_exits_0():
    result = _run({}, "/usr/bin:/bin")
    assert result.returncode == 0, result.stderr
    assert "gpu_check: no NVIDIA GPU present" in result.stdout
    assert "Exiting 0" in result.stdout


def test_a_driver_that_lists_no_gpu_is_no_gpu(tmp_path):
    path = _fake_nvidia_smi(tmp_path, 'echo "No devices were found"; exit 6')
    result = _run({}, path)
    assert result.returncode == 0 and "no NVIDIA GPU present" in result.stdout


def test_a_driver_without_cuda_13_or_12_is_refused(tmp_path):
    path = _fake_nvidia_smi(tmp_path, 'case "$1" in -L) echo "GPU 0: Fake (UUID: x)";; '
                                      '*) echo "| CUDA Version: 11.8 |";; esac')
    result = _run({}, path)
    assert result.returncode == 1
    assert "reports CUDA '11'; cupy-cuda13x needs CUDA 13" in result.stdout


def test_resnet18_autocast_stage_trains_on_strict_and_prints_the_table():
    result = _run({"GPU_CHECK_BACKEND": "strict", "GPU_CHECK_STAGES": "resnet",
                   "GPU_CHECK_BATCH": "2"}, os.environ["PATH"])
    assert result.returncode == 0, result.stdout + result.stderr
    out = result.stdout
    assert "gpu_check summary (backend strict)" in out
    row = next(line for line in out.splitlines() if line.startswith("| ResNet-18"))
    assert "| ok " in row and "on strict:0" in row
    first, last = (float(v) for v in row.split("loss ")[1].split(" in ")[0].split(" -> "))
    assert last < first
