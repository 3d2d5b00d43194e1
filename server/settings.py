"""Typed settings of the language server, parsed once from the editor's JSON.

They arrive as ``initializationOptions`` and as the ``cudaAgent`` section of
``workspace/configuration`` (re-read on ``workspace/didChangeConfiguration``).  Both have the same
shape (the keys VS Code shows as ``cudaAgent.executor.kind`` and so on)::

    {
      "executor": {"kind": "local", "gpu": 0, "gpus": [0, 1]},
      "proposer": {"kind": "builtin", "model": ""},
      "budget": {"seconds": 60, "candidates": 40, "tokens": 200000},
      "arch": "sm_90", "includePaths": [], "defines": [], "compileCommands": "",
      "diagnosticsDelayMs": 400,
      "machine": {
        "executor": {"url": "", "token": "env:CUDA_AGENT_TOKEN", "rayAddress": ""},
        "proposer": {"endpoint": "", "apiKey": "env:OPENAI_API_KEY"}
      }
    }

Secrets (``token``, ``apiKey``) name where the value lives, never the value itself:
``env:NAME`` (an environment variable of the server) or ``file:PATH`` (first line of a file).

**Where code and secrets go is the user's choice, never a workspace's.**  A cloned repository's
``.vscode/settings.json`` (or any project-local configuration a client merges in) must not pick
the URL a kernel, a worker token or an API key is sent to, nor the file or variable a secret is
read from.  So the routes (:data:`ROUTES`: ``executor.url``, ``executor.token``,
``executor.rayAddress``, ``proposer.endpoint``, ``proposer.apiKey``) are read from the
``machine`` object only, which a client fills from its user- or machine-level configuration and
never from a workspace or folder (VS Code: our extension declares these settings
``"scope": "machine"``, restricts them in untrusted workspaces, and builds ``machine`` from the
user's values alone, replacing any ``machine`` key a workspace wrote); anywhere else they are
ignored, with a problem line.  The server's own environment (``CUDA_AGENT_WORKER_URL`` with
``CUDA_AGENT_TOKEN``, ``CUDA_AGENT_LLM_URL``) is the user's too.  A secret is sent only to the URL
configured beside it: an LLM proposer without an endpoint in the same place fails instead of
sending the key to a default address (:func:`server.optimize.make_proposer`).

Parsing never raises: a bad value keeps its default and comes back as a problem to report.
The server's environment has its say over the executor as it has for the CLI
(:func:`sandbox.executors.from_environment`): ``CUDA_AGENT_WORKER_URL`` (with ``CUDA_AGENT_TOKEN``)
or ``CUDA_AGENT_RAY_ADDRESS`` where the settings name no ``executor.kind`` (clients that send no
settings: Neovim, Emacs), and ``CUDA_AGENT_TEST_EXECUTOR=1``, which forces the ``test`` executor
unless a remote worker is configured (candidates then go to that worker, and a problem line says so).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from agent.check import CompileCommandsError, build_options, valid_define
from agent.proposers import PROPOSER_KINDS, ProposerKind
from base.secrets import Secret
from sandbox.executors import EXECUTOR_KINDS, TOKEN_ENV, ExecutorSettings, from_environment

if TYPE_CHECKING:
    from agent.llm import LLMSettings

log = logging.getLogger(__name__)

LLM_URL_ENV = "CUDA_AGENT_LLM_URL"
SECRET_ENV = frozenset({TOKEN_ENV, "OPENAI_API_KEY"})  # what the editor sets in our environment
SECTION = "cudaAgent"
MACHINE = "machine"  # the object that holds the routes: filled from user or machine settings only
ROUTES = {"executor": ("url", "token", "rayAddress"), "proposer": ("endpoint", "apiKey")}


@dataclass(frozen=True)
class ProposerSettings:
    kind: ProposerKind = "builtin"
    endpoint: str = ""  # llm: OpenAI-compatible base URL, e.g. http://localhost:8000/v1
    model: str = ""
    api_key: Secret = field(default_factory=lambda: Secret("env:OPENAI_API_KEY"))

    def llm(self) -> LLMSettings:
        """The LLM client's settings: these over the ``CUDA_AGENT_LLM_*`` environment.  Without an
        endpoint here or in the environment, :class:`~agent.llm.EndpointError`: the key goes only
        to an endpoint set beside it, never to a default address."""
        from agent.llm import EndpointError, LLMSettings

        if not self.endpoint and not os.environ.get(LLM_URL_ENV):
            raise EndpointError(
                f"the llm proposer has no endpoint: set {SECTION}.proposer.endpoint in your user settings "
                f"(a workspace cannot choose where the API key is sent) or {LLM_URL_ENV}"
            )
        kind, _, where = self.api_key.source.partition(":")
        return LLMSettings.from_env(
            base_url=self.endpoint or None,
            model=self.model or None,
            api_key_env=where if kind == "env" else None,
            api_key_file=where if kind == "file" else None,
        )


@dataclass(frozen=True)
class BudgetSettings:
    seconds: float = 60.0
    candidates: int = 40
    tokens: int = 200_000


@dataclass(frozen=True)
class Settings:
    executor: ExecutorSettings = field(default_factory=ExecutorSettings)
    proposer: ProposerSettings = field(default_factory=ProposerSettings)
    budget: BudgetSettings = field(default_factory=BudgetSettings)
    arch: str = "sm_90"
    include_paths: tuple[str, ...] = ()
    defines: tuple[str, ...] = ()
    compile_commands: str = ""
    diagnostics_delay_ms: int = 400


T = TypeVar("T")


class _Reader:
    """Reads typed values out of untrusted JSON, collecting problems instead of raising."""

    def __init__(self, data: Any, prefix: str, problems: list[str]) -> None:
        self.data: Mapping[str, Any] = data if isinstance(data, Mapping) else {}
        self.prefix = prefix
        self.problems = problems
        if data is not None and not isinstance(data, Mapping):
            problems.append(f"{prefix or SECTION}: expected an object, got {type(data).__name__}")

    def child(self, key: str) -> _Reader:
        return _Reader(self.data.get(key), f"{self.prefix}{key}.", self.problems)

    def get(self, key: str, default: T, check: Callable[[Any], bool], want: str) -> T:
        value = self.data.get(key)
        if value is None:
            return default
        if not check(value):
            self.problems.append(f"{self.prefix}{key}: expected {want}, got {value!r}")
            return default
        return value

    def text(self, key: str, default: str = "") -> str:
        return self.get(key, default, lambda v: isinstance(v, str), "a string").strip()

    def choice(self, key: str, default: T, options: tuple[str, ...]) -> T:
        return self.get(key, default, lambda v: v in options, " or ".join(options))

    def number(self, key: str, default: float, low: float) -> float:
        value = self.get(key, default, _is_number, "a number")
        if value < low:
            self.problems.append(f"{self.prefix}{key}: must be at least {low}, got {value}")
            return default
        return float(value)

    def integer(self, key: str, default: int, low: int) -> int:
        return int(self.number(key, default, low))

    def strings(self, key: str) -> tuple[str, ...]:
        value: list[str] = self.get(
            key, [], lambda v: isinstance(v, list) and all(isinstance(s, str) for s in v), "a list of strings"
        )
        return tuple(value)

    def indices(self, key: str) -> tuple[int, ...]:
        value: list[int] = self.get(
            key,
            [],
            lambda v: isinstance(v, list) and all(_is_number(i) and i == int(i) >= 0 for i in v),
            "a list of GPU indices",
        )
        return tuple(dict.fromkeys(int(i) for i in value))

    def secret(self, key: str, default: Secret) -> Secret:
        source = self.text(key, default.source)
        if source and source.partition(":")[0] not in ("env", "file"):
            self.problems.append(f"{self.prefix}{key}: write env:NAME or file:PATH, not the secret itself")
            return default
        return Secret(source)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def parse_settings(data: Any, env: Mapping[str, str] = os.environ) -> tuple[Settings, tuple[str, ...]]:
    """Settings from the editor's JSON (missing keys keep their defaults) and the problems found."""
    problems: list[str] = []
    root = _Reader(data, "", problems)
    ex = root.child("executor")
    pr = root.child("proposer")
    bu = root.child("budget")
    machine = root.child(MACHINE)
    for group, keys in ROUTES.items():
        for key in keys:
            if key in root.child(group).data:
                problems.append(
                    f"{group}.{key}: ignored: where code and secrets go is read from user or machine "
                    f"settings only ({SECTION}.{MACHINE}.{group}.{key}), never from a workspace's"
                )
    mex, mpr = machine.child("executor"), machine.child("proposer")
    d = Settings()
    executor = ExecutorSettings(
        kind=ex.choice("kind", d.executor.kind, EXECUTOR_KINDS),
        gpu=ex.integer("gpu", d.executor.gpu, 0),
        gpus=ex.indices("gpus"),
        url=mex.text("url"),
        token=mex.secret("token", d.executor.token),
        ray_address=mex.text("rayAddress"),
    )
    executor, notes = from_environment(executor, named="kind" in ex.data, env=env)
    problems += [f"executor: {note}" for note in notes]
    if executor.kind == "remote" and not executor.url:
        problems.append(
            f"{MACHINE}.executor.url: the remote executor needs the worker's URL (in user or machine settings)"
        )
    proposer = ProposerSettings(
        kind=pr.choice("kind", d.proposer.kind, PROPOSER_KINDS),
        endpoint=mpr.text("endpoint"),
        model=pr.text("model"),
        api_key=mpr.secret("apiKey", d.proposer.api_key),
    )
    if proposer.kind == "llm" and not proposer.endpoint and not env.get(LLM_URL_ENV):
        problems.append(
            f"{MACHINE}.proposer.endpoint: the llm proposer needs an OpenAI-compatible endpoint URL "
            "(in user or machine settings)"
        )
    settings = Settings(
        executor=executor,
        proposer=proposer,
        budget=BudgetSettings(
            seconds=bu.number("seconds", d.budget.seconds, 1.0),
            candidates=bu.integer("candidates", d.budget.candidates, 1),
            tokens=bu.integer("tokens", d.budget.tokens, 0),
        ),
        arch=root.text("arch", d.arch) or d.arch,
        include_paths=root.strings("includePaths"),
        defines=root.strings("defines"),
        compile_commands=root.text("compileCommands"),
        diagnostics_delay_ms=root.integer("diagnosticsDelayMs", d.diagnostics_delay_ms, 0),
    )
    known = {_camel(f.name) for f in fields(Settings)} | {MACHINE}
    problems += [f"{key}: unknown setting" for key in root.data if key not in known]
    return settings, tuple(problems)


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(w.capitalize() for w in rest)


def compile_options(settings: Settings, path: Path) -> tuple[str, ...]:
    """The editor's build configuration of ``path`` (the same resolution as the CLI's flags); an
    unusable compile_commands.json, and a definition that is not ``NAME[=VALUE]``, are logged and
    left out."""
    defines = tuple(d for d in settings.defines if valid_define(d))
    for bad in set(settings.defines) - set(defines):
        log.warning("cudaAgent.defines: %r is not NAME or NAME=VALUE; left out", bad)
    try:
        return build_options(path, settings.include_paths, defines, settings.compile_commands or None)
    except CompileCommandsError as exc:
        log.info("%s", exc)
        return build_options(path, settings.include_paths, defines)


def program_environment(settings: Settings, base: Mapping[str, str] = os.environ) -> dict[str, str]:
    """The environment of the user's program: this server's, without the secrets the editor put
    there for us (the worker token, the LLM key: :data:`SECRET_ENV` and the variables the
    settings' secrets name) or any other ``CUDA_AGENT_*`` setting of ours."""
    named = {
        s.source.partition(":")[2]
        for s in (settings.executor.token, settings.proposer.api_key)
        if s.source.startswith("env:")
    }
    drop = SECRET_ENV | named
    return {k: v for k, v in base.items() if k not in drop and not k.startswith("CUDA_AGENT_")}
