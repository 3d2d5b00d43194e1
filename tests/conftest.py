"""Shared fixtures, the hardware probe behind the ``gpu`` marker, and a test run that leaves no
trace: the user's data, cache, config and state folders (trajectories, measured ceilings, CuPy's
kernel cache...) are temporary folders for the whole session, in this process and every process
it starts."""

from __future__ import annotations

import functools
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

DATA = Path(__file__).parent / "data"
# where the code under test would write under $HOME: each becomes a folder of one temporary root
ISOLATED = ("XDG_DATA_HOME", "XDG_CACHE_HOME", "XDG_CONFIG_HOME", "XDG_STATE_HOME", "CUPY_CACHE_DIR")
_saved: dict[str, str | None] = {}
_root: list[Path] = []


def pytest_configure(config: pytest.Config) -> None:
    """Point every per-user folder at a temporary one before any test (or fixture) runs."""
    root = Path(tempfile.mkdtemp(prefix="cuda-agent-tests-"))
    _root.append(root)
    for name in ISOLATED:
        _saved[name] = os.environ.get(name)
        folder = root / name.lower()
        folder.mkdir()
        os.environ[name] = str(folder)


def pytest_unconfigure(config: pytest.Config) -> None:
    for name, value in _saved.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value
    for root in _root:
        shutil.rmtree(root, ignore_errors=True)


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


@pytest.fixture(scope="module")
def gpu_executor() -> Iterator[Any]:
    """A local executor for PyTorch answers on this machine's GPU (``gpu`` tests only)."""
    import importlib.util

    if importlib.util.find_spec("torch") is None:
        pytest.skip("torch is not installed (the `torch` extra)")
    from sandbox.local import UNSAFE_TORCH_ENV, LocalExecutor

    with pytest.MonkeyPatch.context() as mp:  # GPU hosts without bubblewrap: the test host is disposable
        mp.setenv(UNSAFE_TORCH_ENV, "1")
        with LocalExecutor() as executor:
            yield executor
