"""Shared fixtures and the hardware probe behind the ``gpu`` marker."""

from __future__ import annotations

import functools
from pathlib import Path

import pytest

DATA = Path(__file__).parent / "data"


@functools.cache
def gpu_unavailable_reason() -> str | None:
    """None when a CUDA GPU is usable through CuPy, else why not (shown in the skip reason)."""
    try:
        import cupy
    except Exception as exc:  # ImportError, or CuPy failing to find libcuda
        return f"no GPU: CuPy is not importable ({type(exc).__name__}: {exc})"
    try:
        n = cupy.cuda.runtime.getDeviceCount()
    except Exception as exc:
        return f"no GPU: CUDA driver unavailable ({exc})"
    return None if n > 0 else "no GPU: CUDA reports 0 devices"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    reason = None
    for item in items:
        if "gpu" in item.keywords:
            reason = reason or gpu_unavailable_reason()
            if reason:
                item.add_marker(pytest.mark.skip(reason=reason))


@pytest.fixture
def data_dir() -> Path:
    return DATA
