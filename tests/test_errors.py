"""Every public exception of the packages descends from the one root, as the tree draws it."""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import pytest
from import_graph import PACKAGES

from base import errors
from base.errors import CudaAgentError, Failed, InputError, Unavailable

OPTIONAL = {"cupy", "torch", "cuda", "cupy_backends"}  # GPU-side imports a CPU machine may lack


def public_exceptions() -> list[type[BaseException]]:
    found: list[type[BaseException]] = []
    for package in map(importlib.import_module, PACKAGES):
        for info in pkgutil.walk_packages(package.__path__, package.__name__ + "."):
            if info.name.endswith("__main__"):
                continue
            try:
                module = importlib.import_module(info.name)
            except ImportError as exc:
                if (exc.name or "").split(".")[0] in OPTIONAL:
                    continue
                raise
            for name, obj in vars(module).items():
                if (
                    inspect.isclass(obj)
                    and issubclass(obj, BaseException)
                    and obj.__module__ == module.__name__
                    and not name.startswith("_")
                ):
                    found.append(obj)
    return found


def test_the_walk_finds_the_known_errors() -> None:
    names = {cls.__name__ for cls in public_exceptions()}
    assert {"InvalidSpec", "ContractError", "ExecutorError", "LLMError", "UserError", "JobFailed"} <= names


@pytest.mark.parametrize("cls", public_exceptions(), ids=lambda c: f"{c.__module__}.{c.__qualname__}")
def test_every_public_exception_descends_from_the_root_and_is_drawn(cls: type[BaseException]) -> None:
    assert issubclass(cls, CudaAgentError), f"{cls.__module__}.{cls.__qualname__} is outside the tree"
    if cls not in (CudaAgentError, InputError, Unavailable, Failed):
        assert issubclass(cls, (InputError, Unavailable, Failed)), "a class hangs off the root directly"
        assert f"{cls.__module__}.{cls.__qualname__}" in (errors.__doc__ or ""), "the tree does not draw it"


def test_codes_come_from_the_branch() -> None:
    from sandbox.contract import RequestError
    from sandbox.executor import NoGpuError

    assert RequestError("f", "x").exit_code == 2 and RequestError("f", "x").rpc_code == -32602
    assert NoGpuError("x").exit_code == 1 and NoGpuError("x").rpc_code == -32603
