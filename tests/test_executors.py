"""The one executor factory: what the environment adds to the executor the CLI or the editor names."""

from __future__ import annotations

from base.secrets import Secret
from sandbox.executors import ExecutorSettings, from_environment
from server.settings import parse_settings

URL = "http://127.0.0.1:8765"


def test_where_none_is_named_a_worker_url_names_a_remote_worker_with_the_environments_token() -> None:
    got, notes = from_environment(ExecutorSettings(gpu=2), named=False, env={"CUDA_AGENT_WORKER_URL": URL})
    assert (got.kind, got.url, got.token, got.gpu, notes) == (
        "remote",
        URL,
        Secret("env:CUDA_AGENT_TOKEN"),
        2,
        (),
    )


def test_a_named_executor_keeps_its_kind_but_the_simulated_gpu_still_applies() -> None:
    env = {"CUDA_AGENT_WORKER_URL": URL, "CUDA_AGENT_RAY_ADDRESS": "ray://head:10001"}
    assert from_environment(ExecutorSettings(), named=True, env=env) == (ExecutorSettings(), ())
    got, _ = from_environment(ExecutorSettings(), named=True, env={"CUDA_AGENT_TEST_EXECUTOR": "1"})
    assert got.kind == "test"
    got, _ = from_environment(ExecutorSettings(), named=True, env={"CUDA_AGENT_TEST_EXECUTOR": "0"})
    assert got.kind == "local"


def test_a_ray_address_wins_over_a_worker_url_and_the_simulated_gpu_over_both_but_a_worker() -> None:
    env = {"CUDA_AGENT_WORKER_URL": URL, "CUDA_AGENT_RAY_ADDRESS": "ray://head:10001"}
    got, _ = from_environment(ExecutorSettings(), named=False, env=env)
    assert (got.kind, got.ray_address) == ("ray", "ray://head:10001")
    got, notes = from_environment(
        ExecutorSettings(), named=False, env={**env, "CUDA_AGENT_TEST_EXECUTOR": "1"}
    )
    assert got.kind == "test" and notes == ()
    got, notes = from_environment(
        ExecutorSettings(), named=False, env={"CUDA_AGENT_WORKER_URL": URL, "CUDA_AGENT_TEST_EXECUTOR": "1"}
    )
    assert got.kind == "remote" and notes == (
        f"CUDA_AGENT_TEST_EXECUTOR is set, but so is the remote worker {URL}: evaluating there "
        "(to simulate there: `cuda-agent worker --simulate`)",
    )


def test_the_editors_settings_go_through_the_same_factory() -> None:
    """The language server's settings and the CLI read the environment one way: a Ray address the
    settings do not override reaches the editor too."""
    settings, problems = parse_settings({}, env={"CUDA_AGENT_RAY_ADDRESS": "ray://head:10001"})
    assert (settings.executor.kind, settings.executor.ray_address, problems) == (
        "ray",
        "ray://head:10001",
        (),
    )
