"""llama-server for the embedded model: where hpt finds it, how it is built (a fake cmake
over a fake sdist), and how the server is started, sized, waited on and shared (a fake
llama-server that answers as the real one does: 503 while loading, then 200)."""

from __future__ import annotations

import io
import json
import os
import socket
import sys
import tarfile
import tomllib
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from packaging.requirements import Requirement

from hpt.backends import FatalBackendError, GenerationParams, Message, local, open_backend
from hpt.backends import llama_build as lb
from hpt.backends.builtin.local import LocalConfig
from tests.test_cli import hpt

REPO = Path(__file__).resolve().parents[1]

FAKE_SERVER = """\
#!{python}
# Answers as llama-server does: 503 on every route while "loading", then /health, /v1/models,
# /props and chat completions. FAKE_ARGV: where to append its arguments (one JSON line).
import http.server, json, os, sys, time
args = sys.argv[1:]
if "--version" in args:
    print("version: 1 (fake)")
    sys.exit(0)
with open(os.environ["FAKE_ARGV"], "a") as f:
    f.write(json.dumps(args) + "\\n")
if os.environ.get("FAKE_MODE") == "die":
    print("load_model: loading model", file=sys.stderr)
    print("llama_model_load: error loading model: bad magic", file=sys.stderr)
    sys.exit(3)
port = int(args[args.index("--port") + 1])
ready = time.monotonic() + float(os.environ.get("FAKE_LOAD_S", "0"))
loading_answers = 0

class Handler(http.server.BaseHTTPRequestHandler):
    def log_message(self, *a):
        pass

    def reply(self, code, body):
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def loading(self):
        global loading_answers
        if time.monotonic() < ready:
            loading_answers += 1
            self.reply(503, {{"error": {{"message": "Loading model", "code": 503}}}})
            return True
        return False

    def do_GET(self):
        if self.loading():
            return
        if self.path.endswith("/health"):
            self.reply(200, {{"status": "ok", "loading_answers": loading_answers}})
        elif self.path.endswith("/models"):
            self.reply(200, {{"data": [{{"id": "SmolLM2-135M-Instruct-Q4_1"}}]}})
        elif self.path == "/props":
            self.reply(200, {{"total_slots": int(args[args.index("--parallel") + 1])}})
        else:
            self.reply(404, {{"error": {{"message": "not found", "code": 404}}}})

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        with open(os.environ["FAKE_ARGV"] + ".bodies", "a") as f:
            f.write(json.dumps(body) + "\\n")
        choice = {{"index": 0, "finish_reason": "stop",
                   "message": {{"role": "assistant", "content": "hello"}}}}
        if body.get("logprobs") and body.get("top_logprobs", 0) >= 1:
            choice["logprobs"] = {{"content": [{{"token": "hello", "logprob": -0.5,
                                                 "top_logprobs": []}}]}}
        self.reply(200, {{"choices": [choice],
                          "usage": {{"prompt_tokens": 3, "completion_tokens": 1}}}})

http.server.ThreadingHTTPServer(("127.0.0.1", port), Handler).serve_forever()
"""


def _executable(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    path.chmod(0o755)
    return path


@pytest.fixture
def fake_server(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """``HPT_LLAMA_SERVER`` names the fake; yields the file its argument lists go to."""
    binary = _executable(tmp_path / "fake" / "llama-server",
                         FAKE_SERVER.format(python=sys.executable))  # fmt: skip
    argv = tmp_path / "argv.jsonl"
    monkeypatch.setenv(lb.BINARY_ENV, str(binary))
    monkeypatch.setenv("FAKE_ARGV", str(argv))
    monkeypatch.delenv(local.SERVER_ENV, raising=False)
    yield argv


def _starts(argv: Path) -> list[list[str]]:
    return [json.loads(line) for line in argv.read_text().splitlines()] if argv.exists() else []


def _last_body(argv: Path) -> dict:
    """The last request body the fake was sent."""
    return json.loads(Path(f"{argv}.bodies").read_text().splitlines()[-1])


def _flag(args: list[str], name: str) -> str:
    return args[args.index(name) + 1]


# -- where the binary is found -------------------------------------------------------------


@pytest.fixture
def places(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Path]:
    """An empty virtualenv bin/, PATH directory and cache, none holding llama-server."""
    dirs = {name: tmp_path / name for name in ("venv", "path", "xdg")}
    for d in dirs.values():
        d.mkdir()
    monkeypatch.setattr(lb, "scripts_dir", lambda: dirs["venv"])
    monkeypatch.setenv("PATH", str(dirs["path"]))
    monkeypatch.setenv("XDG_CACHE_HOME", str(dirs["xdg"]))
    monkeypatch.delenv(lb.BINARY_ENV, raising=False)
    return dirs


def test_lookup_order_named_then_venv_then_path_then_cache(
    places: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    script = "#!/bin/sh\n"
    cached = _executable(lb.cached_binary(), script)
    assert cached == places["xdg"] / "hpt" / "llama-server" / lb.LLAMA_CPP_PYTHON / "llama-server"
    assert lb.find_llama_server() == cached
    on_path = _executable(places["path"] / "llama-server", script)
    assert lb.find_llama_server() == on_path
    in_venv = _executable(places["venv"] / "llama-server", script)
    assert lb.find_llama_server() == in_venv
    named = _executable(tmp_path / "elsewhere" / "my-llama-server", script)
    monkeypatch.setenv(lb.BINARY_ENV, str(named))
    assert lb.find_llama_server() == named
    # A file that cannot run is passed over, as a shell would.
    in_venv.chmod(0o644)
    monkeypatch.delenv(lb.BINARY_ENV)
    assert lb.find_llama_server() == on_path


def test_missing_binary_says_the_exact_build_command(places: dict[str, Path]) -> None:
    with pytest.raises(lb.LlamaServerMissing) as missing:
        lb.find_llama_server()
    message = str(missing.value)
    assert "\n" not in message and isinstance(missing.value, FatalBackendError)
    assert f"with: {sys.executable} -m hpt.backends.llama_build," in message
    assert lb.BINARY_ENV in message


def test_a_named_binary_that_is_not_there_is_refused(
    places: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _executable(places["venv"] / "llama-server", "#!/bin/sh\n")  # not used instead
    monkeypatch.setenv(lb.BINARY_ENV, str(tmp_path / "nowhere"))
    with pytest.raises(lb.LlamaServerMissing, match=r"HPT_LLAMA_SERVER=.*nowhere: not an exec"):
        lb.find_llama_server()


def test_run_without_the_binary_is_one_error_line(data_dir: Path, tmp_path: Path) -> None:
    nowhere = tmp_path / "nowhere" / "llama-server"
    result = hpt("run", "--dataset", "boolq", "--limit", "1", "--data-dir", str(data_dir),
                 "--out", str(tmp_path / "run"), "--no-progress",
                 env={lb.BINARY_ENV: str(nowhere)})  # fmt: skip
    assert result.returncode != 0
    assert result.stderr.strip().splitlines() == [
        f"hpt: error: {lb.BINARY_ENV}={nowhere}: not an executable file"
    ]


# -- the build (a fake cmake over a fake sdist) ---------------------------------------------

FAKE_CMAKE = """\
#!{python}
import json, os, pathlib, sys
args = sys.argv[1:]
with open(os.environ["FAKE_CMAKE_LOG"], "a") as f:
    f.write(json.dumps(args) + "\\n")
if args[0] == "--build":
    if os.environ.get("FAKE_CMAKE_FAIL"):
        print("[1/10] Building CXX object ggml.o")
        print("c++: fatal error: no input files")
        sys.exit(2)
    for k in range(1, 11):
        print(f"[{{k}}/10] Building CXX object part{{k}}.o", flush=True)
    exe = pathlib.Path(args[1]) / "bin" / "llama-server"
    exe.parent.mkdir(parents=True, exist_ok=True)
    exe.write_text("#!/bin/sh\\necho version: fake\\n")
    exe.chmod(0o755)
else:
    src = pathlib.Path(args[args.index("-S") + 1])
    print("-- sources:", sorted(p.name for p in src.iterdir()))
"""


@pytest.fixture
def fake_build(
    places: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> tuple[Path, Path]:
    """A fake cmake in the virtualenv's bin/ and a fake sdist; returns (sdist, cmake log)."""
    _executable(places["venv"] / "cmake", FAKE_CMAKE.format(python=sys.executable))
    log = tmp_path / "cmake.jsonl"
    monkeypatch.setenv("FAKE_CMAKE_LOG", str(log))
    sdist = tmp_path / f"llama_cpp_python-{lb.LLAMA_CPP_PYTHON}.tar.gz"
    top = f"llama_cpp_python-{lb.LLAMA_CPP_PYTHON}"
    with tarfile.open(sdist, "w:gz") as tar:
        for name in ("vendor/llama.cpp/CMakeLists.txt", "vendor/llama.cpp/src/llama.cpp",
                     "llama_cpp/__init__.py", "CMakeLists.txt"):  # fmt: skip
            data = f"// {name}\n".encode()
            info = tarfile.TarInfo(f"{top}/{name}")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return sdist, log


def _calls(log: Path) -> list[list[str]]:
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


def test_build_compiles_only_the_server_offline_and_caches_it(
    fake_build: tuple[Path, Path],
) -> None:
    sdist, log = fake_build
    said: list[str] = []
    built = lb.build(sdist=sdist, jobs=2, say=said.append)
    assert built == lb.cached_binary() and os.access(built, os.X_OK)
    configure, compile_ = _calls(log)
    # Only llama.cpp's sources, configured without anything fetched or linked at build time.
    src = Path(configure[configure.index("-S") + 1])
    assert src.parts[-2:] == ("vendor", "llama.cpp")
    for flag in ("-DLLAMA_USE_PREBUILT_UI=OFF", "-DLLAMA_OPENSSL=OFF", "-DBUILD_SHARED_LIBS=OFF",
                 "-DLLAMA_BUILD_SERVER=ON", "-DLLAMA_BUILD_TESTS=OFF"):  # fmt: skip
        assert flag in configure
    assert compile_[0] == "--build" and compile_[2:] == ["--target", "llama-server", "-j", "2"]
    assert said[0].startswith(f"building llama-server from llama-cpp-python {lb.LLAMA_CPP_PYTHON}")
    assert [s.strip() for s in said[1:-1]] == [f"{p}0% ({p}/10 steps)" for p in range(1, 11)]
    assert said[-1].startswith(f"built {built} in ")
    assert (built.parent / "build.log").read_text().count("Building CXX object") == 10

    # Cached: a second venv (or run) builds nothing; --force builds again.
    assert lb.build(sdist=sdist, say=said.append) == built and len(_calls(log)) == 2
    lb.build(sdist=sdist, force=True, say=said.append)
    assert len(_calls(log)) == 4


def test_a_failed_build_names_its_log_and_caches_nothing(
    fake_build: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    sdist, _ = fake_build
    monkeypatch.setenv("FAKE_CMAKE_FAIL", "1")
    with pytest.raises(lb.LlamaBuildError) as failed:
        lb.build(sdist=sdist, say=lambda _: None)
    message = str(failed.value)
    assert message.startswith("building llama-server failed (cmake exited 2); its log: ")
    assert message.endswith("c++: fatal error: no input files")
    assert not lb.cached_binary().exists()


def test_the_module_builds_into_the_cache_and_copies_into_the_venv(
    fake_build: tuple[Path, Path], places: dict[str, Path], monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    sdist, _ = fake_build
    monkeypatch.setattr(lb, "in_virtualenv", lambda: True)
    assert lb.main(["--sdist", str(sdist)]) == 0
    own = places["venv"] / "llama-server"
    assert capsys.readouterr().out.splitlines()[-1] == f"llama-server: {own}"
    assert own.read_bytes() == lb.cached_binary().read_bytes()
    assert lb.find_llama_server() == own


def test_the_built_release_is_the_one_the_bench_extra_installs() -> None:
    """The server and the library bench/embedded_concurrency.py measures it against run the
    same llama.cpp; the lock, where it still pins the library, agrees."""
    extras = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    bench = [Requirement(r) for r in extras["optional-dependencies"]["bench"]]
    (pin,) = [str(r.specifier) for r in bench if r.name == "llama-cpp-python"]
    assert pin == f"=={lb.LLAMA_CPP_PYTHON}"
    locked = [
        line.split("==")[1]
        for line in (REPO / "packaging" / "constraints.txt").read_text().splitlines()
        if line.lower().replace("-", "_").startswith("llama_cpp_python==")
    ]
    assert locked in ([], [lb.LLAMA_CPP_PYTHON])


# -- starting, sizing, waiting on and sharing the server (the fake llama-server) -----------


def test_slots_and_the_shared_kv_cache() -> None:
    assert (local.slots_for(None), local.slots_for(3), local.slots_for(500)) == (8, 3, 32)
    assert local.LocalServer().n_ctx == 8 * local.SLOT_TOKENS
    # Never below the model's context, so one call may be as long as before.
    assert local.LocalServer(1).n_ctx == local.MODEL_CONTEXT


async def test_startup_waits_through_loading_and_sizes_the_server(
    fake_server: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_LOAD_S", "0.6")
    async with local.embedded_server(3) as url:
        async with httpx.AsyncClient() as client:
            health = (await client.get(f"{url}/health")).json()
    assert health["status"] == "ok" and health["loading_answers"] >= 2  # it waited on 503s
    (args,) = _starts(fake_server)
    assert _flag(args, "--parallel") == "3" and "--kv-unified" in args
    assert _flag(args, "--ctx-size") == str(3 * local.SLOT_TOKENS)
    assert _flag(args, "--host") == "127.0.0.1" and _flag(args, "--flash-attn") == "off"
    with pytest.raises(httpx.ConnectError):  # stopped on leaving
        async with httpx.AsyncClient() as client:
            await client.get(f"{url}/health")


async def test_a_server_that_dies_at_start_is_one_error_with_its_log_tail(
    fake_server: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_MODE", "die")
    with pytest.raises(FatalBackendError) as died:
        async with local.embedded_server(2):
            pass
    message = str(died.value)
    assert "\n" not in message
    assert message.startswith("the embedded model's server (llama-server) exited with status 3 "
                              "while starting; its log ends: ")  # fmt: skip
    assert message.endswith("llama_model_load: error loading model: bad magic")


async def test_the_models_slots_come_from_its_config_and_cap_calls_in_flight(
    fake_server: Path,
) -> None:
    async with open_backend(LocalConfig(slots=5), label="local") as backend:
        out = await backend.complete([Message(role="user", content="hi")], GenerationParams())
        assert out.text == "hello"
        assert backend.stats.concurrency == 5
    (args,) = _starts(fake_server)
    assert _flag(args, "--parallel") == "5"


async def test_logprobs_are_asked_with_one_alternative_unless_turned_off(
    fake_server: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ask = [Message(role="user", content="hi")]
    async with open_backend(LocalConfig(), label="local") as backend:
        scored = await backend.complete(ask, GenerationParams(logprobs=True, seed=1))
    assert scored.logprobs == [-0.5]
    sent = _last_body(fake_server)
    assert (sent["logprobs"], sent["top_logprobs"]) == (True, 1)
    monkeypatch.setenv(local.LOGPROBS_ENV, "off")
    async with open_backend(LocalConfig(), label="local") as backend:
        plain = await backend.complete(ask, GenerationParams(logprobs=True, seed=2))
    assert plain.logprobs is None
    assert "logprobs" not in _last_body(fake_server)
    monkeypatch.setenv(local.LOGPROBS_ENV, "sometimes")
    with pytest.raises(FatalBackendError, match="HPT_LOCAL_LOGPROBS='sometimes': use one of"):
        async with open_backend(LocalConfig(), label="local"):
            pass


async def test_hpt_local_server_is_used_and_left_running(
    fake_server: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with local.embedded_server(2) as url:
        monkeypatch.setenv(local.SERVER_ENV, url)
        async with open_backend(LocalConfig(slots=7), label="local") as backend:
            out = await backend.complete([Message(role="user", content="hi")], GenerationParams())
            assert out.text == "hello"
            assert backend.transport.endpoint == url
            assert backend.stats.concurrency == 2  # the running server's slots, from /props
        assert len(_starts(fake_server)) == 1  # none started for the backend
        async with httpx.AsyncClient() as client:  # and it still runs
            assert (await client.get(f"{url}/health")).status_code == 200


def test_hpt_local_server_that_does_not_answer_is_one_error_line(
    data_dir: Path, tmp_path: Path
) -> None:
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    result = hpt("run", "--dataset", "boolq", "--limit", "1", "--data-dir", str(data_dir),
                 "--out", str(tmp_path / "run"), "--no-progress",
                 env={local.SERVER_ENV: f"http://127.0.0.1:{port}/v1"})  # fmt: skip
    assert result.returncode != 0
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith(f"hpt: error: cannot reach http://127.0.0.1:{port}/v1 ")
