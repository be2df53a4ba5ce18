"""The shipped CUDA kernels compile for A100 (sm_80) and H100/H200 (sm_90) without a warning."""

from __future__ import annotations

import importlib.util

import pytest

from slurmlab.experiments.node import compile as kc

NVCC = kc.find_nvcc()
HAS_NVRTC = importlib.util.find_spec("cupy") is not None


@pytest.mark.parametrize("arch", kc.ARCHS)
@pytest.mark.parametrize("name", sorted(kc.KERNELS))
def test_kernel_compiles_with_nvcc(name: str, arch: str) -> None:
    if NVCC is None:
        pytest.skip("nvcc not found (install the CUDA toolkit to check the kernels)")
    cubin = kc.compile_nvcc(name, arch)
    assert cubin[:4] == b"\x7fELF"


@pytest.mark.parametrize("arch", kc.ARCHS)
@pytest.mark.parametrize("name", sorted(kc.KERNELS))
def test_kernel_compiles_with_nvrtc(name: str, arch: str) -> None:
    if not HAS_NVRTC:
        pytest.skip("cupy is not installed (pip install 'slurmlab[gpu]')")
    try:
        cubin = kc.compile_nvrtc(name, arch)
    except Exception as exc:  # the NVRTC library itself may be absent
        if "nvrtc" in str(exc).lower() and "could not" in str(exc).lower():
            pytest.skip(f"NVRTC library not loadable: {exc}")
        raise
    assert cubin[:4] == b"\x7fELF"


def test_kernel_sources_name_their_entry_points() -> None:
    for name in kc.KERNELS:
        assert f'extern "C" __global__ void {name}(' in kc.kernel_source(name)


BROKEN = 'extern "C" __global__ void k(float* x) { x[0] = undefined_name; }\n'
WARNS = 'extern "C" __global__ void k(float* x) { int unused = 3; x[0] = 1.0f; }\n'


def _with_source(monkeypatch: pytest.MonkeyPatch, text: str) -> None:
    monkeypatch.setattr(kc, "kernel_source", lambda name: text)


@pytest.mark.parametrize("text", [BROKEN, WARNS], ids=["error", "warning"])
def test_nvcc_fails_on_errors_and_warnings(monkeypatch: pytest.MonkeyPatch, text: str) -> None:
    if NVCC is None:
        pytest.skip("nvcc not found")
    _with_source(monkeypatch, text)
    with pytest.raises(kc.KernelCompileError) as info:
        kc.compile_nvcc("fma_work", "sm_90")
    assert "fma_work" in str(info.value)


@pytest.mark.parametrize("text", [BROKEN, WARNS], ids=["error", "warning"])
def test_nvrtc_fails_on_errors_and_warnings(monkeypatch: pytest.MonkeyPatch, text: str) -> None:
    if not HAS_NVRTC:
        pytest.skip("cupy is not installed")
    _with_source(monkeypatch, text)
    with pytest.raises(kc.KernelCompileError):
        kc.compile_nvrtc("fma_work", "sm_90")


def test_bad_arch_and_unknown_kernel_say_what_to_do() -> None:
    with pytest.raises(kc.KernelCompileError, match="sm_80"):
        kc.compile_nvcc("fma_work", "ampere")
    with pytest.raises(kc.KernelCompileError, match="choose one of"):
        kc.kernel_source("nope")
