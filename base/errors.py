"""The one exception tree of CUDA Agent.

Every public error any layer raises descends from :class:`CudaAgentError`, through one of three
branches that say whose move it is.  The CLI's exit status and the language server's JSON-RPC error
code come from the branch (``exit_code``, ``rpc_code``), never from a message's text.  The root lives
in the bottom layer, :mod:`base`, so that every package can descend from it without an upward
import; each class stays in the module that raises it.

::

    CudaAgentError
    ├── InputError                     the input is wrong: fix it and retry     exit 2, -32602
    │   ├── sandbox.contract.ContractError          a request breaks the contract
    │   │   └── sandbox.contract.RequestError       ...a field of it, named
    │   │       └── sandbox.program_wire.TooLarge   ...over a size cap of the worker (413)
    │   ├── cudasrc.specs.model.InvalidSpec         a spec line does not parse or resolve
    │   ├── sandbox.expr.ExpressionError            a spec expression is not in the grammar
    │   ├── agent.target.TargetError                no such kernel / no spec for it
    │   ├── sandbox.scheduler.GpuListError          a list of GPU indices does not parse
    │   ├── agent.proposer.BudgetError              a budget does not parse
    │   ├── agent.check.CompileCommandsError        a compile_commands.json is unusable
    │   ├── agent.check.DefineError                 a -D is not NAME[=VALUE]
    │   ├── agent.capture.CaptureMismatch           a captured launch disagrees with the source
    │   ├── agent.program_remote.MachineError       a program cannot go to the worker
    │   ├── learning.tasks.TaskError                a reward task file is malformed
    │   ├── sandbox.recorded.RecordedMissing        no recorded inputs under that digest
    │   ├── engine.maps.Unmapped                    an index is not quasi-affine at a size
    │   ├── agent.llm.NoCode                        a model reply holds no code
    │   └── server.cli.common.UserError             a command-line mistake
    ├── Unavailable                    this machine lacks something            exit 1, -32603
    │   ├── sandbox.executor.ExecutorError          the GPU side cannot serve the request
    │   │   ├── sandbox.executor.NoGpuError         ...no usable GPU
    │   │   ├── sandbox.executor.WorkerUnavailable  ...a remote worker cannot be reached
    │   │   └── sandbox.executor.AuthError          ...the worker refused the token
    │   ├── sandbox.compiler.CompilerUnavailable    no NVRTC / nvcc
    │   ├── sandbox.confine.ConfinementError        no isolation where one is required
    │   ├── sandbox.capture.CaptureError            the CUPTI capture could not run
    │   ├── agent.llm.LLMError                      the model endpoint failed
    │   │   ├── agent.llm.EndpointError             ...HTTP or transport error
    │   │   ├── agent.llm.ToolsUnsupported          ...the server has no tool calls
    │   │   └── agent.llm.ReplyError                ...an unusable reply
    │   └── learning.client.RewardError             the reward service failed
    └── Failed                         the work ran and failed                 exit 1, -32603
        ├── sandbox.runtime.CudaError               a CUDA call returned an error
        ├── sandbox.runtime.MemoryCapExceeded       a run asked for more than its memory cap
        ├── agent.program.Cancelled                 a speedup run was cancelled (files restored)
        └── server.cli.common.JobFailed             a CLI job's verdict is a failure

Built-in bases are kept beside the branch where callers catch them (``InvalidSpec`` is still a
``ValueError``); ``tests/test_errors.py`` checks that every public exception class of every
package is in this tree.
"""

from __future__ import annotations

from typing import ClassVar


class CudaAgentError(Exception):
    """The root: every public error of CUDA Agent."""

    exit_code: ClassVar[int] = 1
    rpc_code: ClassVar[int] = -32603  # JSON-RPC internal error


class InputError(CudaAgentError):
    """The input (a request, a file, a spec, an argument) is wrong; fixing it fixes the call."""

    exit_code: ClassVar[int] = 2
    rpc_code: ClassVar[int] = -32602  # JSON-RPC invalid params


class Unavailable(CudaAgentError):
    """Something this machine or its configuration lacks (a GPU, a compiler, a worker, a model)."""


class Failed(CudaAgentError):
    """The work ran and failed."""


def install_hint(extra: str) -> str:
    """How to add an optional part (an extra of pyproject.toml): the package is on no index, so
    from the clone."""
    return f"pip install -e '.[{extra}]' in your clone of cuda-agent"
