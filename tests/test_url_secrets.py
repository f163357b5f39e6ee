"""Credentials in a URL -- ``user:password@`` or a key in its query -- are shown and saved
as ``***``, never as written: not in errors, tables, records, run.json nor the summary. A
resume is given them again. The servers are protocol-faithful ones on loopback."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from aiohttp import web

from hpt.backends.secrets import redact, redact_url, redact_urls, remember_url_credentials
from hpt.backends.urls import join_route, split_query
from hpt.cli.main import main
from hpt.orchestrator.config import ConfigError
from hpt.orchestrator.resume import load_saved_spec
from tests.servers.openai_compat import FakeOpenAI, ServerThread
from tests.servers.tgi import FakeTGI


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("http://user:pw@host/v1", "http://user:***@host/v1"),
        ("https://ghp_token123@host:8443/v1", "https://***@host:8443/v1"),
        ("http://host/v1?api_key=sk-abc&model=x", "http://host/v1?api_key=***&model=x"),
        ("http://host/v1?api-key=a&access_token=b&client_secret=c&password=d&sig=e",
         "http://host/v1?api-key=***&access_token=***&client_secret=***&password=***&sig=***"),
        ("https://b.s3.amazonaws.com/f?X-Amz-Credential=AK%2F1&X-Amz-Signature=ff&X-Amz-Date=1",
         "https://b.s3.amazonaws.com/f?X-Amz-Credential=***&X-Amz-Signature=***&X-Amz-Date=1"),
        ("http://u:p@[::1/v1?token=t#frag", "http://u:***@[::1/v1?token=***#frag"),  # malformed
        ("http://host:8080/v1?api-version=2024-06-01", "http://host:8080/v1?api-version=2024-06-01"),
        ("http://host/v1?key=", "http://host/v1?key="),
        ("no url at all", "no url at all"),
    ],
)  # fmt: skip
def test_redact_url(url: str, shown: str) -> None:
    assert redact_url(url) == shown
    assert redact_url(shown) == shown  # redacting twice changes nothing


def test_credentials_leave_free_text() -> None:
    text = "failed: POST http://me:hunter2-pw@h/v1/chat (and again http://h/v1?token=tok-987)"
    assert redact_urls(text) == (
        "failed: POST http://me:***@h/v1/chat (and again http://h/v1?token=***)"
    )
    # Registered, a credential is taken out of text that holds it outside a URL too.
    remember_url_credentials("http://h/v1?api_key=sk-free-text-42")
    assert redact("the server echoed sk-free-text-42 back") == "the server echoed *** back"


# -- against servers --------------------------------------------------------------------------
SECRET = "s3cret-pw-24"
USER = "hpt"


def _basic(user: str, password: str) -> str:
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()


@pytest.fixture
def tgi() -> Iterator[tuple[ServerThread, list[str | None]]]:
    """TGI behind basic authentication: only ``hpt:SECRET`` is let in."""
    seen: list[str | None] = []

    @web.middleware
    async def auth(request: web.Request, handler):  # type: ignore[no-untyped-def]
        given = request.headers.get("Authorization")
        seen.append(given)
        if given != _basic(USER, SECRET):
            return web.json_response({"error": "unauthorized", "error_type": "auth"}, status=401)
        return await handler(request)

    app = FakeTGI().app()
    app.middlewares.append(auth)
    server = ServerThread(app).start()
    yield server, seen
    server.stop()


def _url(server: ServerThread, password: str = SECRET) -> str:
    return f"http://{USER}:{password}@127.0.0.1:{server.port}"


def files_holding(root: Path, secret: str) -> list[Path]:
    return [p for p in root.rglob("*") if p.is_file() and secret.encode() in p.read_bytes()]


def run(argv: list[object], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_credentials_in_a_model_url_are_used_and_never_saved(
    tgi: tuple[ServerThread, list[str | None]], data_dir: Path, tmp_path: Path,
    capsys: pytest.CaptureFixture[str], _private_cache: Path,
) -> None:  # fmt: skip
    server, seen = tgi
    out = tmp_path / "run"
    code, stdout, stderr = run(
        ["run", "--dataset", "boolq", "--model", f"tgi:{_url(server)}", "--data-dir", data_dir,
         "--limit", "2", "--strategies", "role", "--out", out, "--no-progress"], capsys,
    )  # fmt: skip
    assert code == 0, stderr
    assert set(seen) == {_basic(USER, SECRET)}  # the server was given them
    shown = f"tgi:http://{USER}:***@127.0.0.1:{server.port}"
    assert shown in stdout and SECRET not in stdout + stderr
    assert files_holding(out, SECRET) == [] and files_holding(_private_cache, SECRET) == []
    saved = json.loads((out / "run.json").read_text())
    assert saved["model"] == [shown]
    records = [json.loads(line) for line in (out / "samples.jsonl").read_text().splitlines()]
    assert {r["model"] for r in records} == {shown}
    # What is read back from the directory shows them hidden too.
    for command in (["summarize", out], ["report", out, "--no-plots"]):
        code, stdout, stderr = run(command, capsys)
        assert code == 0 and shown in stdout and SECRET not in stdout + stderr
    assert files_holding(out, SECRET) == []


def test_a_config_endpoint_and_the_command_line_are_saved_without_them(
    tgi: tuple[ServerThread, list[str | None]], data_dir: Path, tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    server, _ = tgi
    config = tmp_path / "run.toml"
    config.write_text(f'[models.guarded]\nprovider = "tgi"\nendpoints = ["{_url(server)}"]\n')
    out = tmp_path / "run"
    code, stdout, stderr = run(
        ["run", "--config", config, "--dataset", "boolq", "--model", "guarded", "--data-dir",
         data_dir, "--limit", "1", "--strategies", "role", "--out", out, "--no-progress"], capsys,
    )  # fmt: skip
    assert code == 0, stderr
    assert SECRET not in stdout + stderr
    saved = json.loads((out / "run.json").read_text())
    assert saved["models"]["guarded"]["endpoints"] == [_url(server, "***")]
    assert files_holding(out, SECRET) == []


def test_a_resume_is_given_the_credentials_again(
    tgi: tuple[ServerThread, list[str | None]], data_dir: Path, tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    server, _ = tgi
    out = tmp_path / "run"
    argv = ["run", "--dataset", "boolq", "--model", f"tgi:{_url(server)}", "--data-dir", data_dir,
            "--limit", "1", "--strategies", "role", "--out", out, "--no-progress"]  # fmt: skip
    assert run(argv, capsys)[0] == 0
    saved = load_saved_spec(out).run_spec()
    with pytest.raises(ConfigError, match=r"http://hpt:\*\*\*@127\.0\.0\.1:\d+ was saved without"):
        saved.restore_credentials([])
    with pytest.raises(ConfigError, match="none of the run's endpoints"):
        saved.restore_credentials([f"http://{USER}:x@127.0.0.1:1"])
    restored = saved.restore_credentials([_url(server)])
    assert restored.model == [f"tgi:{_url(server)}"]
    # Every resume hint (interrupted, stopped by a fault) asks for the endpoint again.
    for spec in (saved, restored):
        hint = spec.resume_command(out)
        assert hint.startswith(f"hpt run --resume {out} --base-url '{_url(server, '***')}'")
        assert SECRET not in hint
    assert restored.params.model_fields_set == saved.params.model_fields_set


def test_resume_asks_for_the_credentials_and_takes_them(
    tgi: tuple[ServerThread, list[str | None]], data_dir: Path, tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    server, seen = tgi
    out = tmp_path / "run"
    argv = ["run", "--dataset", "boolq", "--model", f"tgi:{_url(server)}", "--data-dir", data_dir,
            "--limit", "1", "--strategies", "role", "--out", out, "--no-progress"]  # fmt: skip
    assert run(argv, capsys)[0] == 0
    (out / "samples.jsonl").write_text("")  # nothing finished: the resume calls the model
    seen.clear()
    code, _, stderr = run(["run", "--resume", out, "--no-progress"], capsys)
    assert code == 2 and stderr.startswith("hpt: error:") and "--base-url" in stderr
    assert seen == []  # nothing was sent with "***" for a password
    code, _, stderr = run(["run", "--resume", out, "--base-url", _url(server), "--no-progress"],
                          capsys)  # fmt: skip
    assert code == 0, stderr
    assert seen and set(seen) == {_basic(USER, SECRET)}
    assert files_holding(out, SECRET) == []


def test_a_key_in_the_base_url_query_never_shows(
    data_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch, _private_cache: Path,
) -> None:  # fmt: skip
    fake = FakeOpenAI(responder=lambda body: "True")
    server = ServerThread(fake.app()).start()
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    key = "sk-query-key-24"
    out = tmp_path / "run"
    try:
        code, stdout, stderr = run(
            ["run", "--dataset", "boolq", "--model", "openai:test-model", "--base-url",
             f"{server.base_url}?api_key={key}", "--data-dir", data_dir, "--limit", "1",
             "--strategies", "role", "--out", out, "--no-progress"], capsys,
        )  # fmt: skip
    finally:
        server.stop()
    # The route goes on the URL's path, the query after it: the call is answered...
    assert code == 0, stderr
    assert len(fake.requests) == 1
    # ...and the key shows nowhere.
    assert key not in stdout + stderr
    assert files_holding(tmp_path, key) == [] and files_holding(_private_cache, key) == []
    assert "api_key=***" in (out / "run.json").read_text()


@pytest.mark.parametrize(
    ("base", "joined", "apart"),
    [
        ("http://h/v1", "http://h/v1/chat/completions", ("http://h/v1", {})),
        ("http://h/v1/?k=1", "http://h/v1/chat/completions?k=1", ("http://h/v1/", {"k": "1"})),
        (
            "https://h/openai?api-version=2024-10&api_key=x",
            "https://h/openai/chat/completions?api-version=2024-10&api_key=x",
            ("https://h/openai", {"api-version": "2024-10", "api_key": "x"}),
        ),
    ],
)
def test_routes_join_the_path_and_keep_the_query(
    base: str, joined: str, apart: tuple[str, dict[str, str]]
) -> None:
    assert join_route(base, "chat/completions") == joined
    assert split_query(base) == apart


def test_user_and_password_beside_a_key_is_one_line(
    data_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    fake = FakeOpenAI(responder=lambda body: "True")
    server = ServerThread(fake.app()).start()
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    try:
        code, stdout, stderr = run(
            ["run", "--dataset", "boolq", "--model", "openai:test-model", "--base-url",
             f"http://me:{SECRET}@127.0.0.1:{server.port}/v1", "--data-dir", data_dir,
             "--limit", "1", "--out", tmp_path / "run", "--no-progress"], capsys,
        )  # fmt: skip
    finally:
        server.stop()
    lines = stderr.strip().splitlines()
    assert code == 2 and len(lines) == 1 and lines[0].startswith("hpt: error:"), stderr
    assert f"http://me:***@127.0.0.1:{server.port}/v1" in lines[0]
    assert SECRET not in stdout + stderr


def test_a_tgi_url_with_a_query_is_one_line_without_its_key(
    data_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    key = "sk-tgi-query-77"
    code, out, err = run(
        ["run", "--dataset", "boolq", "--model", f"tgi:http://127.0.0.1:9/?token={key}",
         "--data-dir", data_dir, "--limit", "1", "--out", tmp_path / "run", "--no-cache"],
        capsys,
    )  # fmt: skip
    assert code == 2 and key not in out + err
    assert err.strip().splitlines() == [
        "hpt: error: http://127.0.0.1:9/?token=***: a TGI endpoint takes no query string; give "
        "the server's token with HF_TOKEN, or its user and password in the URL (user:pw@host)"
    ]
    assert not (tmp_path / "run").exists()
