from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

from hpt.tasks import get_task
from tests.servers.answer_key import boolq_answer_key
from tests.servers.openai_compat import FakeOpenAI, ServerThread

REPO = Path(__file__).resolve().parents[1]


def _shared_data() -> Path:
    configured = os.environ.get("HPT_TEST_DATA")
    path = Path(configured) if configured else REPO.parent / "shared" / "data"
    if not (path / "boolq" / "validation.jsonl").is_file():
        pytest.fail(f"test data not found at {path}; set HPT_TEST_DATA to a copy of shared/data")
    return path


@pytest.fixture(autouse=True)
def _private_cache(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> Path:
    """Each test gets its own response cache (subprocesses inherit the variable)."""
    path = tmp_path_factory.mktemp("cache")
    monkeypatch.setenv("HPT_CACHE_DIR", str(path))
    return path


@pytest.fixture(scope="session")
def data_dir() -> Path:
    return _shared_data()


@pytest.fixture(scope="session")
def boolq_answers(data_dir: Path) -> dict[str, str]:
    return boolq_answer_key(get_task("boolq", data_dir).load_samples())


@pytest.fixture
def fake_openai() -> Iterator[tuple[FakeOpenAI, ServerThread]]:
    fake = FakeOpenAI(responder=lambda body: "True")
    server = ServerThread(fake.app()).start()
    yield fake, server
    server.stop()


def interruptible() -> None:
    """A child's Ctrl-C back to Python's default: a shell that starts a job in the background
    (CI runners do) has it ignore SIGINT, and children inherit that."""
    signal.signal(signal.SIGINT, signal.default_int_handler)
