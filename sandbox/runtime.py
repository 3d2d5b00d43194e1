"""The GPU runtime behind a small interface: load a cubin, allocate, copy, launch, time, sync.

Only sandbox worker processes import this module's backends (CuPy, optionally PyCUDA); the rest
of the system never touches a GPU library.  Device memory is addressed by plain integer pointers
so verification and timing code (``sandbox.verify``, ``sandbox.timing``) is backend-neutral.

Errors: every backend raises :class:`CudaError` with the CUDA error name; :attr:`CudaError.sticky`
says whether the context is now unusable (illegal address, launch failure, trap...), in which
case the worker must restart (any error not known to be recoverable counts as sticky).  All launches go to the legacy default stream, which waits for
every blocking stream's earlier work: an event recorded after a launch there marks the end of
all host-visible work on the device.
"""

from __future__ import annotations

import abc
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from base.errors import Failed
from sandbox.contract import DeviceInfo, Launch

# Errors that leave the CUDA context usable: bad launch configurations, missing symbols, bad images,
# allocation failures. Any other error (illegal address, invalid address space, trap, launch
# failure...) is treated as sticky: the context is broken and the worker restarts.
_RECOVERABLE = (
    "INVALID_VALUE",
    "InvalidValue",
    "OUT_OF_RESOURCES",
    "OutOfResources",
    "INVALID_IMAGE",
    "InvalidKernelImage",
    "NOT_FOUND",
    "NotFound",
    "InvalidDeviceFunction",
    "NO_BINARY_FOR_GPU",
    "NoKernelImageForDevice",
    "INVALID_PTX",
    "InvalidPtx",
    "UNSUPPORTED_PTX_VERSION",
    "UnsupportedPtxVersion",
    "OUT_OF_MEMORY",
    "MemoryAllocation",
    "InvalidConfiguration",
    "INVALID_HANDLE",
    "InvalidResourceHandle",
)

KernelArg = int | np.generic  # device pointers are passed as np.uint64, scalars as numpy scalars


class CudaError(Failed, RuntimeError):
    """A CUDA call failed. ``sticky``: the context is broken and the process must start over."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.sticky = not any(tag in message for tag in _RECOVERABLE)


@dataclass(frozen=True)
class KernelHandle:
    """A loaded kernel: backend function object and the module it came from; ``symbols``: the
    lowered (mangled) names of the module's ``__constant__``/``__device__`` variables whose name
    expression is not their symbol (``mask<float>`` -> ``_Z4maskIfE``)."""

    function: Any
    module: Any
    name: str
    symbols: Mapping[str, str] = field(default_factory=dict)


class Runtime(abc.ABC):
    """One device, one context, synchronous semantics unless a method says ``async``."""

    _acct: _Accounting

    @abc.abstractmethod
    def device_info(self) -> DeviceInfo: ...

    @abc.abstractmethod
    def max_shared_optin(self) -> int:
        """Most dynamic shared memory one block may ask for (after opting in)."""

    def set_memory_limit(self, nbytes: int) -> None:
        """Cap on the bytes allocated through :meth:`alloc` from now on (0: none)."""
        self._acct.limit = nbytes

    def allocated(self) -> int:
        """Bytes allocated through :meth:`alloc` and not yet freed."""
        return sum(self._acct.sizes.values())

    @abc.abstractmethod
    def load(self, cubin: bytes, name: str, symbols: Mapping[str, str] | None = None) -> KernelHandle:
        """Load ``cubin`` and look up kernel ``name`` (mangled); ``symbols``: the module's variables'
        lowered names (:attr:`KernelHandle.symbols`). Raises :class:`CudaError`."""

    @abc.abstractmethod
    def global_symbol(self, kernel: KernelHandle, name: str) -> int:
        """Device address of a ``__constant__``/``__device__`` variable of the kernel's module, by
        its name expression (through :attr:`KernelHandle.symbols`)."""

    @abc.abstractmethod
    def alloc(self, nbytes: int) -> int: ...

    @abc.abstractmethod
    def free(self, ptr: int) -> None: ...

    @abc.abstractmethod
    def htod(self, ptr: int, host: np.ndarray) -> None: ...

    @abc.abstractmethod
    def dtoh(self, ptr: int, nbytes: int) -> np.ndarray:
        """Copy ``nbytes`` to a new uint8 host array."""

    @abc.abstractmethod
    def pinned(self, nbytes: int) -> np.ndarray:
        """``nbytes`` of page-locked host memory (uint8), kept while the array lives; under unified
        addressing (every 64-bit process) kernels read it at the array's own address."""

    @abc.abstractmethod
    def memset_async(self, ptr: int, byte: int, nbytes: int) -> None: ...

    @abc.abstractmethod
    def copy_async(self, dst: int, src: int, nbytes: int) -> None: ...

    @abc.abstractmethod
    def launch(self, kernel: KernelHandle, launch: Launch, args: Sequence[KernelArg]) -> None:
        """Enqueue a launch on the default stream (asynchronous)."""

    @abc.abstractmethod
    def event(self) -> Any: ...

    @abc.abstractmethod
    def record(self, event: Any) -> None: ...

    @abc.abstractmethod
    def elapsed_ms(self, start: Any, end: Any) -> float: ...

    @abc.abstractmethod
    def synchronize(self) -> None:
        """Wait for the whole device; raises :class:`CudaError` for an error of earlier async work."""

    def gemm_gflops(self, n: int, dtype: str = "float32") -> float:
        """GEMM rate (cuBLAS) for ``n``×``n`` matrices of ``dtype`` (float32: FP32 units;
        float16: tensor cores); 0.0 when the backend has no BLAS."""
        return 0.0

    def device_key(self) -> str:
        """A name for the physical device, the same in every process (PCI bus id), or ''."""
        return ""

    def array_module(self) -> Any:
        """The device array library (CuPy) when this backend shares its context and stream with
        one, so verification can compare, draw inputs and keep references on the device; None:
        verification runs on the host (``sandbox.verify`` then uses numpy)."""
        return None

    def device_view(self, ptr: int, nbytes: int) -> Any:
        """A device array (uint8) over ``nbytes`` at ``ptr``, owning nothing; only where
        :meth:`array_module` is not None."""
        raise NotImplementedError(f"{type(self).__name__} has no device arrays")

    def free_memory(self) -> int:
        """Bytes of device memory free now (0: unknown)."""
        return 0

    @contextmanager
    def buffer(self, nbytes: int) -> Iterator[int]:
        ptr = self.alloc(nbytes)
        try:
            yield ptr
        finally:
            self.free(ptr)


def make_runtime(backend: str, device: int = 0, memory_limit: int = 0) -> Runtime:
    """The runtime named by ``EvalOptions.backend``; imports the GPU library only now."""
    if backend == "cupy":
        return CupyRuntime(device, memory_limit)
    if backend == "pycuda":
        return PycudaRuntime(device, memory_limit)
    raise ValueError(f"unknown GPU backend {backend!r}")


class MemoryCapExceeded(Failed, RuntimeError):
    """An evaluation asked for more device memory than its budget allows."""


class _Accounting:
    """Bytes allocated now, against the per-evaluation cap (0: no cap)."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.sizes: dict[int, int] = {}

    def check(self, nbytes: int) -> None:
        held = sum(self.sizes.values())
        if self.limit and held + nbytes > self.limit:
            raise MemoryCapExceeded(
                f"allocating {nbytes} bytes on top of the {held} this evaluation holds would exceed its GPU "
                f"memory cap of {self.limit} bytes (raise it with --max-memory-gb)"
            )


class CupyRuntime(Runtime):
    def __init__(self, device: int = 0, memory_limit: int = 0) -> None:
        import cupy

        self._cp = cupy
        self._index = device
        try:
            cupy.cuda.Device(device).use()
        except Exception as exc:
            raise CudaError(str(exc)) from exc
        self._acct = _Accounting(memory_limit)
        self._mem: dict[int, Any] = {}
        self._stream = cupy.cuda.Stream.null

    @contextmanager
    def _errors(self) -> Iterator[None]:
        try:
            yield
        except (self._cp.cuda.driver.CUDADriverError, self._cp.cuda.runtime.CUDARuntimeError) as exc:
            raise CudaError(str(exc)) from exc
        except self._cp.cuda.memory.OutOfMemoryError as exc:
            raise MemoryCapExceeded(str(exc)) from exc

    def device_info(self) -> DeviceInfo:
        rt = self._cp.cuda.runtime
        with self._errors():
            props = rt.getDeviceProperties(self._index)
            _free, total = rt.memGetInfo()
            driver = rt.driverGetVersion()
        name = props["name"]
        return DeviceInfo(
            name=name.decode() if isinstance(name, bytes) else str(name),
            compute_capability=f"{props['major']}.{props['minor']}",
            sm_count=int(props["multiProcessorCount"]),
            l2_bytes=int(props["l2CacheSize"]),
            memory_bytes=int(total),
            driver=f"{driver // 1000}.{driver % 1000 // 10}",
            index=self._index,
        )

    def max_shared_optin(self) -> int:
        with self._errors():
            return int(self._cp.cuda.runtime.deviceGetAttribute(97, self._index))  # ...PerBlockOptin

    def load(self, cubin: bytes, name: str, symbols: Mapping[str, str] | None = None) -> KernelHandle:
        with self._errors():
            module = self._cp.cuda.function.Module()
            module.load(cubin)
            return KernelHandle(module.get_function(name), module, name, dict(symbols or {}))

    def global_symbol(self, kernel: KernelHandle, name: str) -> int:
        with self._errors():
            var = kernel.module.get_global_var(kernel.symbols.get(name, name))
        # CuPy 14 returns the device address as an int; older versions a MemoryPointer (``.ptr``)
        return int(getattr(var, "ptr", var))

    def alloc(self, nbytes: int) -> int:
        self._acct.check(nbytes)
        with self._errors():
            mem = self._cp.cuda.alloc(max(nbytes, 1))
        self._mem[mem.ptr] = mem
        self._acct.sizes[mem.ptr] = nbytes
        return int(mem.ptr)

    def free(self, ptr: int) -> None:
        self._mem.pop(ptr, None)
        self._acct.sizes.pop(ptr, None)

    def htod(self, ptr: int, host: np.ndarray) -> None:
        host = np.ascontiguousarray(host)
        with self._errors():
            self._cp.cuda.runtime.memcpy(ptr, host.ctypes.data, host.nbytes, 1)

    def dtoh(self, ptr: int, nbytes: int) -> np.ndarray:
        out = np.empty(nbytes, dtype=np.uint8)
        with self._errors():
            self._cp.cuda.runtime.memcpy(out.ctypes.data, ptr, nbytes, 2)
        return out

    def pinned(self, nbytes: int) -> np.ndarray:
        with self._errors():
            mem = self._cp.cuda.alloc_pinned_memory(nbytes)
        return np.frombuffer(mem, np.uint8, nbytes)  # the array keeps ``mem`` alive

    def memset_async(self, ptr: int, byte: int, nbytes: int) -> None:
        with self._errors():
            self._cp.cuda.runtime.memsetAsync(ptr, byte, nbytes, self._stream.ptr)

    def copy_async(self, dst: int, src: int, nbytes: int) -> None:
        with self._errors():
            self._cp.cuda.runtime.memcpyAsync(dst, src, nbytes, 3, self._stream.ptr)

    def launch(self, kernel: KernelHandle, launch: Launch, args: Sequence[KernelArg]) -> None:
        with self._errors():
            if launch.shared_bytes > 48 * 1024:  # CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
                self._cp.cuda.driver.funcSetAttribute(kernel.function.ptr, 8, launch.shared_bytes)
            kernel.function(
                launch.grid,
                launch.block,
                tuple(np.uint64(a) if isinstance(a, int) else a for a in args),
                shared_mem=launch.shared_bytes,
                stream=self._stream,
            )

    def event(self) -> Any:
        return self._cp.cuda.Event()

    def record(self, event: Any) -> None:
        with self._errors():
            event.record(self._stream)

    def elapsed_ms(self, start: Any, end: Any) -> float:
        with self._errors():
            return float(self._cp.cuda.get_elapsed_time(start, end))

    def synchronize(self) -> None:
        with self._errors():
            self._cp.cuda.runtime.deviceSynchronize()

    def device_key(self) -> str:
        with self._errors():
            return str(self._cp.cuda.runtime.deviceGetPCIBusId(self._index))

    def array_module(self) -> Any:
        return self._cp

    def device_view(self, ptr: int, nbytes: int) -> Any:
        cp = self._cp
        memory = cp.cuda.UnownedMemory(ptr, nbytes, self)
        return cp.ndarray((nbytes,), dtype=cp.uint8, memptr=cp.cuda.MemoryPointer(memory, 0))

    def free_memory(self) -> int:
        with self._errors():
            free, _total = self._cp.cuda.runtime.memGetInfo()
        return int(free) + int(self._cp.get_default_memory_pool().free_bytes())

    def gemm_gflops(self, n: int, dtype: str = "float32") -> float:
        cp = self._cp
        with self._errors():
            a = cp.random.random((n, n), dtype=cp.float32).astype(dtype)
            b = cp.random.random((n, n), dtype=cp.float32).astype(dtype)
            cp.matmul(a, b)  # warm up cuBLAS
            start, end = self.event(), self.event()
            reps = 5
            self.record(start)
            for _ in range(reps):
                cp.matmul(a, b)
            self.record(end)
            self.synchronize()
            ms = self.elapsed_ms(start, end) / reps
        return 2.0 * n**3 / (ms * 1e-3) / 1e9


class PycudaRuntime(Runtime):
    """The optional second backend (``pip install -e '.[pycuda]'``)."""

    def __init__(self, device: int = 0, memory_limit: int = 0) -> None:
        import pycuda.driver as drv

        self._drv = drv
        self._index = device
        try:
            drv.init()
            self._ctx = drv.Device(device).retain_primary_context()
            self._ctx.push()
        except drv.Error as exc:
            raise CudaError(str(exc)) from exc
        self._acct = _Accounting(memory_limit)
        self._mem: dict[int, Any] = {}

    @contextmanager
    def _errors(self) -> Iterator[None]:
        try:
            yield
        except self._drv.Error as exc:
            raise CudaError(f"{type(exc).__name__}: {exc}") from exc

    def device_info(self) -> DeviceInfo:
        drv = self._drv
        with self._errors():
            dev = drv.Device(self._index)
            attr = drv.device_attribute
            major, minor = dev.compute_capability()
            driver = drv.get_driver_version()
            return DeviceInfo(
                name=dev.name(),
                compute_capability=f"{major}.{minor}",
                sm_count=dev.get_attribute(attr.MULTIPROCESSOR_COUNT),
                l2_bytes=dev.get_attribute(attr.L2_CACHE_SIZE),
                memory_bytes=dev.total_memory(),
                driver=f"{driver // 1000}.{driver % 1000 // 10}",
                index=self._index,
            )

    def max_shared_optin(self) -> int:
        with self._errors():
            attr = self._drv.device_attribute.MAX_SHARED_MEMORY_PER_BLOCK_OPTIN
            return int(self._drv.Device(self._index).get_attribute(attr))

    def load(self, cubin: bytes, name: str, symbols: Mapping[str, str] | None = None) -> KernelHandle:
        with self._errors():
            module = self._drv.module_from_buffer(cubin)
            return KernelHandle(module.get_function(name), module, name, dict(symbols or {}))

    def global_symbol(self, kernel: KernelHandle, name: str) -> int:
        with self._errors():
            ptr, _size = kernel.module.get_global(kernel.symbols.get(name, name))
        return int(ptr)

    def device_key(self) -> str:
        with self._errors():
            return str(self._drv.Device(self._index).pci_bus_id())

    def alloc(self, nbytes: int) -> int:
        self._acct.check(nbytes)
        with self._errors():
            mem = self._drv.mem_alloc(max(nbytes, 1))
        self._mem[int(mem)] = mem
        self._acct.sizes[int(mem)] = nbytes
        return int(mem)

    def free(self, ptr: int) -> None:
        mem = self._mem.pop(ptr, None)
        self._acct.sizes.pop(ptr, None)
        if mem is not None:
            mem.free()

    def htod(self, ptr: int, host: np.ndarray) -> None:
        with self._errors():
            self._drv.memcpy_htod(ptr, np.ascontiguousarray(host))

    def dtoh(self, ptr: int, nbytes: int) -> np.ndarray:
        out = np.empty(nbytes, dtype=np.uint8)
        with self._errors():
            self._drv.memcpy_dtoh(out, ptr)
        return out

    def pinned(self, nbytes: int) -> np.ndarray:
        with self._errors():
            return self._drv.pagelocked_empty(nbytes, np.uint8)

    def memset_async(self, ptr: int, byte: int, nbytes: int) -> None:
        with self._errors():
            self._drv.memset_d8_async(ptr, byte, nbytes)

    def copy_async(self, dst: int, src: int, nbytes: int) -> None:
        with self._errors():
            self._drv.memcpy_dtod_async(dst, src, nbytes)

    def launch(self, kernel: KernelHandle, launch: Launch, args: Sequence[KernelArg]) -> None:
        with self._errors():
            if launch.shared_bytes > 48 * 1024:
                attr = self._drv.function_attribute.MAX_DYNAMIC_SHARED_SIZE_BYTES
                kernel.function.set_attribute(attr, launch.shared_bytes)
            kernel.function(
                *(np.uintp(a) if isinstance(a, int) else a for a in args),
                grid=launch.grid,
                block=launch.block,
                shared=launch.shared_bytes,
            )

    def event(self) -> Any:
        return self._drv.Event()

    def record(self, event: Any) -> None:
        with self._errors():
            event.record()

    def elapsed_ms(self, start: Any, end: Any) -> float:
        with self._errors():
            return float(end.time_since(start))

    def synchronize(self) -> None:
        with self._errors():
            self._drv.Context.synchronize()
