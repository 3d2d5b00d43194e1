"""The compile path and the worker process as a boundary, attacked as a request's sender or an LLM
would: includes of host files, options that write files, filename injection, pickles sent up the
worker's pipe, tokens in the worker's environment, secrets in what the LLM is shown.  CPU only:
real NVRTC, real worker processes running the tests' scripted GPU handler."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from loop_fakes import MarkerExecutor, saxpy_target, variant
from sandbox_fakes import kernel_file, vadd_request
from scripted_llm import Call, Say, ScriptedLLM

from agent.llm import LLMProposer, LLMSettings, scrub
from agent.loop import LoopSettings, optimize
from agent.proposer import OptimizeBudget
from sandbox.boundary import (
    DEFAULT_STD,
    applies_trigraphs,
    check_options,
    language_standard,
    preprocessor_includes,
)
from sandbox.compile_pool import CompilePool
from sandbox.compiler import Compiled, carry_headers, compile_cuda, refused
from sandbox.contract import Candidate, CandidateResult, KernelSource, RequestLimits, Status, to_json
from sandbox.isolation import bwrap_prefix, clean_env, compile_bwrap_prefix
from sandbox.local import LocalExecutor
from sandbox.service import _parse_request
from sandbox.wire import Binary, CompileJob, EvalJob, Reply, decode_reply, encode

KERNEL = 'extern "C" __global__ void k(float* x) { x[threadIdx.x] = 1.f; }\n'
SECRET = "s3cr3t-Value-4711"


@pytest.fixture
def secret_file(tmp_path: Path) -> Path:
    path = tmp_path / "token"
    path.write_text(f"TOKEN_LINE_{SECRET} = 1\n")
    return path


def attacks(secret: Path) -> dict[str, str]:
    """Ways to make the preprocessor open a file, each of which NVRTC follows when unguarded."""
    s = str(secret)
    return {
        "quoted": '#include "/proc/self/environ"\n',
        "angled": "#include </proc/self/environ>\n",
        "shadow": '#include "/etc/shadow"\n',
        "token file": f'#include "{s}"\n',
        "dot-dot": '#include "../../../../../../../../etc/passwd"\n',
        "digraph": f'%:include "{s}"\n',
        "comment": f'#/* x */include "{s}"\n',
        "splice": f'#inc\\\nlude "{s}"\n',
        "macro": f'#define F "{s}"\n#include F\n',
        "include_next": f'#include_next "{s}"\n',
        "trigraph": f'??=include "{s}"\n',
        "after raw string": f'const char* r = R"x( " /* )x";\n#include "{s}"\n// */\n',
        "after string with comment": f'const char* r = "/*";\n#include "{s}"\n// */\n',
        "multi-line comment": f'/* a\n */ #include "{s}"\n',
    }


@pytest.mark.parametrize("name", list(attacks(Path("/x"))))
def test_untrusted_include_of_a_host_file_is_refused_without_its_content(
    name: str, secret_file: Path
) -> None:
    source = attacks(secret_file)[name] + KERNEL
    options = ("-std=c++11",) if name == "trigraph" else ()  # trigraphs are on in C++11
    out = compile_cuda(source, name_expressions=("k",), options=options).result
    assert not out.ok
    assert SECRET not in out.log and "root:" not in out.log and "PATH=" not in out.log
    assert "#include" in out.log or "computed" in out.log
    unguarded = compile_cuda(source, name_expressions=("k",), options=options, trusted=True).result
    if name not in ("shadow", "dot-dot", "quoted", "angled"):  # the attack is real: NVRTC reads it
        assert SECRET in unguarded.log


def test_quoted_include_from_the_working_directory_or_the_files_folder_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "passwd").write_text(f"PW_{SECRET} = 1\n")
    monkeypatch.chdir(tmp_path)
    out = compile_cuda('#include "passwd"\n' + KERNEL).result
    assert not out.ok and SECRET not in out.log and "no such header" in out.log
    etc = compile_cuda('#include "passwd"\n' + KERNEL, filename="/etc/kernel.cu").result
    assert not etc.ok and "plain file name" in etc.log and "root:" not in etc.log


def test_cuda_headers_and_the_requests_own_headers_compile_untrusted() -> None:
    headers = {"lib/scale.cuh": '#include "factor.cuh"\n__device__ float scale(float x) { return F * x; }\n'}
    headers["factor.cuh"] = "#define F 2.f\n"
    src = (
        "#include <cuda_fp16.h>\n#include <cooperative_groups.h>\n#include <cstdint>\n"
        '#include "lib/scale.cuh"\nextern "C" __global__ void k(float* x) { x[0] = scale(x[0]); }\n'
    )
    out = compile_cuda(src, name_expressions=("k",), headers=headers)
    assert out.result.ok, out.result.log
    bad = {"a.cuh": '#include "/etc/passwd"\n'}
    refused_ = compile_cuda('#include "a.cuh"\n' + KERNEL, headers=bad).result
    assert not refused_.ok and refused_.log.startswith("a.cuh:1:") and "root:" not in refused_.log
    escape = compile_cuda(KERNEL, headers={"../x.h": ""}).result
    assert not escape.ok and "without '..'" in escape.log


def test_the_scan_finds_directives_as_the_preprocessor_does() -> None:
    src = '// #include "a"\n"#include \\"b\\""\nR"(\n#include "c"\n)"\n  #  include <d>\n#define X 1\nint x = 1\'000;\n'
    assert preprocessor_includes(src, trigraphs=True) == [(6, "include", "<d>"), (7, "define", "X")]


def service_refusal(kernel: KernelSource) -> dict[str, str]:
    """The worker service's 422 body for a request with ``kernel`` as its baseline."""
    response = _parse_request(to_json(vadd_request(kernel, ())).encode(), RequestLimits())
    assert getattr(response, "status_code", None) == 422
    refusal: dict[str, str] = json.loads(bytes(response.body))  # type: ignore[union-attr]
    return refusal


@pytest.mark.parametrize(
    "option",
    ["--time={f}", "--create-pch={f}", "--pch-dir={d}", "--fdevice-time-trace={f}", "-I/", "--include-path=/",
     "-include", "--pre-include={f}", "--ptxas-options=-v", "-DTHRUST_HOST_SYSTEM=x", "-Dx\ny"],
)  # fmt: skip
def test_options_that_touch_files_are_refused_and_create_nothing(option: str, tmp_path: Path) -> None:
    target = tmp_path / "out"
    option = option.format(f=target, d=tmp_path / "pch")
    out = compile_cuda(KERNEL, options=(option,)).result
    assert not out.ok and repr(option) in out.log and "not allowed" in out.log
    assert not target.exists() and not (tmp_path / "pch").exists()
    refusal = service_refusal(KernelSource(KERNEL, "k", (option,)))
    assert repr(option) in refusal["error"] or refusal.get("field", "").endswith("options[0]")


def test_allowed_options_compile_and_arch_must_be_the_devices() -> None:
    options = ("-DSCALE=2", "-std=c++17", "--use_fast_math", "-lineinfo", "--fmad=false", "-maxrregcount=32")
    assert compile_cuda(KERNEL, options=(*options, "-arch=sm_90"), arch="sm_90").result.ok
    assert (
        check_options(("-arch=sm_80",), "sm_90")
        == "NVRTC option '-arch=sm_80' is not allowed: this worker compiles for sm_90"
    )


@pytest.mark.parametrize(
    "filename", ["k.cu\nrm -rf ~", "/etc/kernel.cu", "..", "a/b.cu", "k" * 101 + ".cu", ""]
)
def test_unsafe_filenames_are_refused(filename: str) -> None:
    out = compile_cuda(KERNEL, filename=filename).result
    assert not out.ok and "filename" in out.log
    refusal = service_refusal(KernelSource(KERNEL, "k", filename=filename))
    assert "filename" in refusal["error"] or refusal.get("field", "").endswith("filename")


# --------------------------------------------------------------------------- the worker's pipe


@pytest.fixture
def executor(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[LocalExecutor]:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    ex = LocalExecutor(handler="sandbox_fakes:ScriptedHandler", sandbox=False, compile_workers=1)
    yield ex
    ex.close()


def test_a_pickle_written_up_the_pipe_is_refused_and_runs_nothing(
    executor: LocalExecutor, data_dir: Path, tmp_path: Path
) -> None:
    vadd = kernel_file(data_dir / "sandbox" / "vadd.cu", "vadd")
    marker = tmp_path / "pwned"
    request = vadd_request(vadd, (Candidate("gadget", vadd), Candidate("ok1", vadd)), request_id=str(marker))
    gadget, ok = executor.evaluate(request).candidates
    assert (
        gadget.status is Status.CRASH
        and "malformed reply" in gadget.message
        and "restarted" in gadget.message
    )
    assert ok.status is Status.OK
    assert not marker.exists()


def test_replies_must_be_the_result_the_job_expects(data_dir: Path) -> None:
    vadd = kernel_file(data_dir / "sandbox" / "vadd.cu", "vadd")
    job = EvalJob(vadd_request(vadd, (Candidate("c1", vadd),)), Binary(b"\x7fELF", "vadd"), 0)
    good = encode(Reply(CandidateResult("c1", Status.OK)))
    assert decode_reply(good, job).value == CandidateResult("c1", Status.OK)
    compile_job = CompileJob(KERNEL, "k.cu", ("k",), "sm_90", (), {})
    assert isinstance(decode_reply(encode(Reply(refused("no"))), compile_job).value, Compiled)
    for bad in (
        encode(Reply(CandidateResult("other", Status.OK))),  # a result for another candidate
        encode(Reply(refused("x"))),  # the wrong type
        b"\x80\x04K\x01.",  # a pickle
        json.dumps(
            {"reply": "candidate", "value": {"candidate_id": "c1"}, "restart": 0, "unavailable": ""}
        ).encode(),
        b"[" * 100_000,  # too deep
    ):
        with pytest.raises(ValueError, match=r"malformed reply|answered for"):
            decode_reply(bad, job)


def test_worker_environment_keeps_no_token_or_key(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in (
        "CUDA_AGENT_TOKEN",
        "CUDA_AGENT_API_KEY",
        "CUDA_AGENT_LLM_URL",
        "AWS_SECRET_ACCESS_KEY",
        "HF_TOKEN",
    ):
        monkeypatch.setenv(name, SECRET)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")
    env = clean_env()
    assert SECRET not in json.dumps(env) and env["CUDA_VISIBLE_DEVICES"] == "0"
    assert SECRET not in json.dumps(clean_env(compile_only=True))


@pytest.mark.skipif(not bwrap_prefix(), reason="bubblewrap (bwrap) is not installed or not usable here")
def test_bwrap_worker_sees_no_password_hashes_parent_environment_or_token(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, data_dir: Path
) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setenv("CUDA_AGENT_TOKEN", SECRET)
    vadd = kernel_file(data_dir / "sandbox" / "vadd.cu", "vadd")
    with LocalExecutor(handler="sandbox_fakes:ScriptedHandler", sandbox=True, compile_workers=1) as ex:
        assert ex.sandboxed
        request = vadd_request(vadd, (Candidate("peek", vadd),), request_id=str(os.getpid()))
        (peek,) = ex.evaluate(request).candidates
    assert peek.message == "shadow=no parent_env=no token_env=no"
    with LocalExecutor(handler="sandbox_fakes:ScriptedHandler", sandbox=False, compile_workers=1) as ex:
        (peek,) = ex.evaluate(request).candidates
    assert "parent_env=yes token_env=no" in peek.message  # what the sandbox takes away


@pytest.mark.skipif(
    not compile_bwrap_prefix(), reason="bubblewrap (bwrap) is not installed or not usable here"
)
def test_the_compile_pool_runs_inside_bwrap_and_still_compiles() -> None:
    pool = CompilePool(1)
    try:
        assert "bwrap" in pool.isolation
        out = pool.submit("#include <cuda_fp16.h>\n" + KERNEL, name_expressions=("k",)).result(timeout=60)
        assert out.result.ok and out.binary[:4] == b"\x7fELF"
    finally:
        pool.close()


# --------------------------------------------------------------------------- what the LLM sees


def test_scrub_removes_environment_values_keys_and_host_paths(monkeypatch: pytest.MonkeyPatch) -> None:
    from sandbox.compiler import cuda_include_dirs

    monkeypatch.setenv("SOME_SETTING", SECRET)
    header = f"{cuda_include_dirs()[-1]}/cuda/std/cstdint"
    text = scrub(
        f"{SECRET} sk-proj-abcdefghijklmnop ghp_{'a' * 36} AKIAABCDEFGHIJKLMNOP Bearer abc.def-123456 "
        f"/etc/passwd(1): error {header}(3): note a[i]/b[i] x/2"
    )
    assert SECRET not in text and "sk-proj" not in text and "ghp_" not in text and "AKIA" not in text
    assert "abc.def" not in text and "/etc/passwd" not in text
    assert header in text and "a[i]/b[i] x/2" in text


class LeakingCompiler:
    """A compile pool whose log leaks the environment (as an unguarded compile would)."""

    def submit(self, source: str, **kw: object) -> object:
        from concurrent.futures import Future

        from sandbox.contract import CompileResult

        fut: Future[Compiled] = Future()
        log = f"/proc/self/environ(1): error: bad\n  LLM_TEST_SECRET={SECRET}\n  ^\n"
        fut.set_result(Compiled(CompileResult(ok=False, log=log)))
        return fut

    def close(self) -> None:
        pass


@pytest.mark.parametrize("compiler", ["pool", "leaking"])
def test_the_llm_never_sees_a_secret_from_a_compile(monkeypatch: pytest.MonkeyPatch, compiler: str) -> None:
    monkeypatch.setenv("LLM_TEST_SECRET", SECRET)
    target = saxpy_target()
    evil = '#include "/proc/self/environ"\n' + variant(target, "x")
    script = [Call((("compile", {"code": evil}), ("verify_and_time", {"code": evil}))), Say("done")]
    settings = LLMSettings(base_url="", model="scripted", samples=1, max_turns=3, timeout_s=5)
    pool = CompilePool(workers=1) if compiler == "pool" else LeakingCompiler()
    with ScriptedLLM(script) as server:
        proposer = LLMProposer(LLMSettings(**{**settings.__dict__, "base_url": server.url}), compiler=pool)  # type: ignore[arg-type]
        try:
            optimize(
                target,
                proposer,
                MarkerExecutor(),
                budget=OptimizeBudget(wall_s=30),
                settings=LoopSettings(batch_size=2),
            )
        finally:
            proposer.close()
    bodies = [json.dumps(r.body) for r in server.requests]
    assert len(bodies) == 2 and all(SECRET not in b for b in bodies)
    tool_answer = server.requests[1].body["messages"][-2]["content"]
    assert tool_answer.startswith("Compilation failed")
    if compiler == "pool":
        assert "is not allowed" in tool_answer
    else:
        assert "<env>" in tool_answer


CONTEXTS = (
    "",
    'const char* s = "/*";\n',
    'const char* s = R"x( " /* )x";\n',
    'const char* s = R"x( )\\\nx" /* )x";\n',
    "int n = 1'0'0; // '\n",
    "char c = '\"'; /* \" */\n",
    "/* a */ /* b\n */\n",
    "// comment \\\n",
    "#if 0\n",
    "#define EMPTY\n",
)
HASHES = ("#", "%:", "??=", "#/**/", " # ", "#\\\n", "\\\n#")
NAMES = ("include", "inc\\\nlude", "include_next", "import")
ARGS = ('"{s}"', "<{s}>", 'EMPTY "{s}"', '"{s}" // x', '/**/"{s}"')


def test_differential_no_spelling_that_nvrtc_follows_gets_past_the_scan(secret_file: Path) -> None:
    """Random spellings of an include of a host file, after code that could confuse a scanner: every
    one that unguarded NVRTC follows (the file's content in its log) must be refused untrusted."""
    import random

    rng = random.Random(12)
    followed = 0
    for _ in range(60):
        arg = rng.choice(ARGS).format(s=secret_file)
        line = f"{rng.choice(HASHES)}{rng.choice(NAMES)} {arg}\n"
        tail = "#endif\n" if "#if 0" in (ctx := rng.choice(CONTEXTS)) else ""
        source = "#define EMPTY\n" + ctx + line + tail + KERNEL
        options = ("-std=c++11",)  # trigraphs on
        unguarded = compile_cuda(source, name_expressions=("k",), options=options, trusted=True).result
        followed += SECRET in unguarded.log
        guarded = compile_cuda(source, name_expressions=("k",), options=options).result
        assert SECRET not in guarded.log, source
    assert followed >= 10  # the cases are real attacks, not spellings NVRTC ignores


def test_a_trusted_client_carries_its_own_headers_into_the_request(tmp_path: Path) -> None:
    (tmp_path / "lib").mkdir()
    (tmp_path / "lib" / "a.cuh").write_text(
        '#pragma once\n#include "b.cuh"\n__device__ float twice(float x) { return B * x; }\n'
    )
    (tmp_path / "lib" / "b.cuh").write_text("#define B 2.f\n")
    main = tmp_path / "main.cu"
    main.write_text('#include "lib/a.cuh"\n' + KERNEL.replace("1.f", "twice(1.f)"))
    headers, options = carry_headers(main.read_text(), str(main), (f"-I{tmp_path}", "-DX=1"))
    assert set(headers) == {"lib/a.cuh", "b.cuh"} and options == ("-DX=1",)
    out = compile_cuda(main.read_text(), name_expressions=("k",), options=options, headers=headers)
    assert out.result.ok, out.result.log
    assert not compile_cuda(main.read_text(), options=(f"-I{tmp_path}",)).result.ok  # untrusted: no -I


def test_remote_worker_on_loopback_refuses_host_reads_and_file_writes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, data_dir: Path, secret_file: Path
) -> None:
    """The real service and LocalExecutor (compile workers, a GPU worker with the scripted handler):
    includes of host files come back ``compile_error`` without content, file-writing options 422."""
    from test_remote import TOKEN, running_worker

    from sandbox.executor import ExecutorError
    from sandbox.remote import RemoteExecutor

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setenv("CUDA_AGENT_TOKEN", SECRET)
    vadd = kernel_file(data_dir / "sandbox" / "vadd.cu", "vadd")
    evil = {
        "environ": '#include "/proc/self/environ"\n',
        "angled": "#include </proc/self/environ>\n",
        "token": f'#include "{secret_file}"\n',
        "passwd": '#include "passwd"\n',
    }
    cands = tuple(Candidate(cid, KernelSource(inc + vadd.source, "vadd")) for cid, inc in evil.items())
    with (
        LocalExecutor(handler="sandbox_fakes:ScriptedHandler", compile_workers=1) as local,
        running_worker(local) as (url, _),
        RemoteExecutor(url, TOKEN) as remote,
    ):
        result = remote.evaluate(vadd_request(vadd, (*cands, Candidate("ok1", vadd)), request_id="evil"))
        pch = tmp_path / "x.pch"
        writer = KernelSource(vadd.source, "vadd", (f"--create-pch={pch}",))
        with pytest.raises(ExecutorError, match="create-pch"):
            remote.evaluate(vadd_request(vadd, (Candidate("w", writer),), request_id="writer"))
    *bad, ok = result.candidates
    assert ok.status is Status.OK
    for r in bad:
        assert r.status is Status.COMPILE_ERROR and "#include" in r.message, r
        blob = to_json(r)
        assert SECRET not in blob and "PATH=" not in blob and "root:" not in blob
    assert not pch.exists()


def trigraph_probes(secret: Path) -> dict[str, str]:
    """Includes that hide behind ``??/`` in one dialect and are live in the other (issue 37)."""
    s = str(secret)
    return {
        "comment ??/": f'// x ??/\n#include "{s}"\n',
        "string ending ??/": f'const char* t = "a??/";\n#include "{s}"\n',
        "open string ??/": f'const char* t = "??/\n#include "{s}"\n";\n',
        "stringizer": f'#define S(x) #x\nstatic_assert(false, S(\n// x ??/\n#include "{s}"\n));\n',
        "??= directive": f'??=include "{s}"\n',
        "splice after ??/": f'// ??/\\\n#include "{s}"\n',
    }


STDS = (None, "c++03", "c++11", "c++14", "c++17", "c++20")


@pytest.mark.parametrize("std", STDS)
def test_trigraph_includes_return_nothing_under_any_std_confined_or_not(
    std: str | None, secret_file: Path
) -> None:
    """Each probe against NVRTC itself: unguarded, NVRTC reads the file under some ``-std`` (the
    probes are real); untrusted, in this process (unconfined) and in the compile pool (confined
    where this host can), no byte of it comes back, and the scan reads the dialect the compile uses."""
    options = (f"-std={std}",) if std else ()
    probes = trigraph_probes(secret_file)
    pool = CompilePool(1)
    try:
        leaked = []
        for name, probe in probes.items():
            source = probe + KERNEL
            unguarded = compile_cuda(source, name_expressions=("k",), options=options, trusted=True).result
            if SECRET in unguarded.log:
                leaked.append(name)
            direct = compile_cuda(source, name_expressions=("k",), options=options).result
            pooled = pool.submit(source, name_expressions=("k",), options=options).result(timeout=120)
            for out in (direct, pooled.result):
                assert SECRET not in to_json(out), (std, name)
                assert not out.ok or SECRET not in unguarded.log, (std, name)
    finally:
        pool.close()
    assert leaked  # under every -std at least one probe reaches the file when unguarded
    if applies := std in ("c++03", "c++11", "c++14"):
        assert "??= directive" in leaked
    else:
        assert {"comment ??/", "stringizer"} <= set(leaked)
    assert applies == applies_trigraphs(options)


def test_the_scan_reads_each_dialect() -> None:
    src = '// x ??/\n#include "a"\n??=include "b"\n'
    assert preprocessor_includes(src, trigraphs=False) == [(2, "include", '"a"')]
    assert preprocessor_includes(src, trigraphs=True) == [(3, "include", '"b"')]
    assert language_standard(("-std=c++14", "--std=c++20")) == "c++20"
    assert language_standard(()) == DEFAULT_STD == "c++17"
