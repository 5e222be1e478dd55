"""The policy and the profiles: ``show()`` lists every setting with its value and where
it came from; a change in code shows "code", the environment "env: NAME"; the serial
profile runs no thread anywhere and ``default`` brings the threads back."""
import io
import os
import subprocess
import sys
import threading

import numpy as np
import pytest

import lezero as lz
from lezero import runtime
from lezero.runtime import blas, policy, scheduler, settings, variables


def _shown():
    out = io.StringIO()
    runtime.show(file=out)
    return out.getvalue()


def _row(name):
    return next(r for r in runtime.rows() if r[1] == name)


def test_show_lists_every_entry_setting_and_variable_with_value_and_source():
    text = _shown()
    names = [name for name, *_ in policy.entries()] + [s[0] for s in settings.SETTINGS] + \
        [v[0] for v in variables.VARIABLES]
    for name in names:
        assert f"  {name} " in text, name
    for name in ("small_flops", "min_part_items", "serial_below", "spin_reads", "threads",
                 "machine_gemm_gflops", "profile", "blas_thread_timeout"):
        assert name in dict((n, v) for n, v, *_ in policy.entries())
    assert _row("small_flops")[2:4] == (8e6, "default")
    assert _row("conv_threads")[:4] == ("lz.Config", "conv_threads", 0, "default")
    assert [line for line in text.splitlines() if line.startswith("[")] == \
        ["[policy]", "[lz.Config]", "[environment]"]


def test_a_change_in_code_shows_code_and_reset_restores_the_default():
    policy.small_flops = 4e6
    try:
        assert _row("small_flops")[2:4] == (4e6, "code")
        assert "code" in next(line for line in _shown().splitlines() if "small_flops" in line)
    finally:
        policy.reset("small_flops")
    assert _row("small_flops")[2:4] == (8e6, "default")
    with lz.using_config("pair_gemms", False):
        assert _row("pair_gemms")[2:4] == (False, "code")
    with policy.using(spin_reads=5):
        assert policy.spin_reads == 5 and policy.source("spin_reads") == "code"
    assert policy.spin_reads == 1 << 18 and policy.source("spin_reads") == "default"


def test_environment_values_show_env():
    code = ("import lezero.runtime as r; p = r.policy; "
            "print(p.threads, p.source('threads'), p.profile, p.source('profile'))")
    env = dict(os.environ, NUMBA_NUM_THREADS="3", LEZERO_PROFILE="serial")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                         text=True, timeout=120, check=True).stdout.split()
    assert out == ["3", "env:", "NUMBA_NUM_THREADS", "serial", "env:", "LEZERO_PROFILE"]


@pytest.mark.parametrize("name,value,error", [("small_flops", "8e6", TypeError),
                                              ("small_flops", True, TypeError),
                                              ("spin_reads", -1, ValueError),
                                              ("no_such_entry", 1, AttributeError)])
def test_bad_policy_values_are_refused_naming_the_entry(name, value, error):
    with pytest.raises(error, match=name):
        setattr(policy, name, value)


def test_an_unknown_profile_is_refused():
    with pytest.raises(ValueError, match=r"use_profile: profile must be one of .* 'fast'"):
        runtime.use_profile("fast")


@pytest.fixture
def serial():
    before = policy.profile
    runtime.use_profile("serial")
    yield
    runtime.use_profile(before)


def test_the_serial_profile_runs_no_thread(serial):
    idents = []
    assert scheduler.run_parts(lambda i: idents.append(threading.get_ident()) or i, 3) == \
        [0, 1, 2]
    assert set(idents) == {threading.get_ident()}
    with lz.using_config("conv_threads", 4):
        assert scheduler.threads() == 1
        assert scheduler.threads_for(100, 1e12, 1) == 1
    assert policy.profile == "serial" and policy.source("profile") == "code"


def test_the_serial_profile_holds_blas_to_one_thread_and_default_restores_it(threaded):
    libs = blas._blas_libs()
    if not libs:
        pytest.skip("needs threadpoolctl and a BLAS it can see")
    with blas.limit_all(2):
        runtime.use_profile("serial")
        try:
            assert [c.get_num_threads() for c in libs] == [1] * len(libs)
        finally:
            runtime.use_profile("default")
        assert [c.get_num_threads() for c in libs] == [2] * len(libs)


def test_the_serial_profile_applied_again_holds_blas_to_one_thread_again(threaded):
    """Serial already (LEZERO_PROFILE=serial), then BLAS raised by other code: asking
    for the serial profile holds it to one thread again."""
    libs = blas._blas_libs()
    if not libs:
        pytest.skip("needs threadpoolctl and a BLAS it can see")
    runtime.use_profile("serial")
    with blas.limit_all(2):
        runtime.use_profile("serial")
        assert [c.get_num_threads() for c in libs] == [1] * len(libs)


def test_a_model_step_under_the_serial_profile_equals_the_default(serial):
    """A split convolution and linear layer give the same numbers serially."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((8, 3, 12, 12)).astype(np.float32)
    conv = lz.nn.Conv2d(3, 4, 3)
    out = conv(lz.Variable(x))
    out.sum().backward()
    runtime.use_profile("default")
    with lz.using_config("conv_threads", 2), policy.using(conv_min_part_flops=1):
        conv.cleargrads()
        ref = conv(lz.Variable(x))
        ref.sum().backward()
        grad = conv.weight.grad.data.copy()
    runtime.use_profile("serial")
    conv.cleargrads()
    conv(lz.Variable(x)).sum().backward()
    np.testing.assert_allclose(out.data, ref.data, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(conv.weight.grad.data, grad, rtol=1e-4, atol=1e-4)
