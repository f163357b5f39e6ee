"""Every file a command reads, damaged: random bytes, truncations, bytes that are not UTF-8,
JSON of the wrong types. A command answers with one line, ``hpt: error: ...``, and exit 2 --
or exit 0 where what is left is still an acceptable file -- and never with a traceback.

Deterministic (one seed) and in-process through ``hpt.cli.main.main``; the model is a
protocol-faithful OpenAI server on loopback, so an input that is acceptable runs for real.
"""

from __future__ import annotations

import csv
import gzip
import io
import json
import random
import shutil
import tarfile
import traceback
import zipfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from hpt.cli.main import main
from tests.servers.openai_compat import FakeOpenAI, ServerThread
from tests.test_depth_graph import make_dir as make_graph_dir

SEED = 24
MODELS = ("test-model", "other-model")
SHARED: Path  # set by the shared_data fixture (the test data directory)


# -- damage --------------------------------------------------------------------------------
@dataclass(frozen=True)
class Damage:
    name: str
    data: bytes
    # The damage may leave an acceptable file (a shorter one, an ignored field): exit 0 is
    # then a right answer too.
    may_pass: bool = False


def _line_start_near_middle(data: bytes) -> int:
    middle = len(data) // 2
    newline = data.find(b"\n", middle)
    return newline + 1 if 0 <= newline < len(data) - 1 else middle


def byte_damage(valid: bytes, salt: str) -> list[Damage]:
    """Random bytes, bytes that are not UTF-8 amid valid text, and cuts at three places."""
    rng = random.Random(f"{SEED}:{salt}")
    at = _line_start_near_middle(valid)
    cuts = sorted({len(valid) // 3, len(valid) // 2, max(len(valid) - 3, 0)})
    return [
        Damage("random-bytes", rng.randbytes(400)),
        Damage("not-utf8", valid[:at] + b"\xc3\x28\xff\xfe " + valid[at:]),
        Damage("nul-bytes", valid[:at] + b"\x00" * 8 + valid[at:], may_pass=True),
        Damage("empty", b"", may_pass=True),
        *(Damage(f"cut-at-{c}", valid[:c], may_pass=True) for c in cuts),
    ]


def _swapped(value: object) -> object:
    """A value of another JSON type."""
    if isinstance(value, bool):
        return "maybe"
    if isinstance(value, int | float):
        return "not a number"
    if isinstance(value, str):
        return 12345
    if isinstance(value, list):
        return {"a": 1}
    if isinstance(value, dict):
        return [1, 2]
    return [None]


NOT_OBJECTS = ("[]", '"text"', "7", "null", "[{}]")


def jsonl_type_damage(valid: bytes) -> list[Damage]:
    """The first line replaced by JSON that is no object, and each of its fields in turn
    given a value of another type (which a lenient field may accept)."""
    first, _, rest = valid.partition(b"\n")
    row = json.loads(first)
    found = [Damage(f"line-is-{v}", v.encode() + b"\n" + rest) for v in NOT_OBJECTS]
    for key in row:
        bad = {**row, key: _swapped(row[key])}
        found.append(Damage(f"{key}-type", json.dumps(bad).encode() + b"\n" + rest, True))
    return found


def json_type_damage(valid: bytes) -> list[Damage]:
    """A JSON document replaced by one of another type, or each top-level field swapped."""
    doc = json.loads(valid)
    found = [Damage(f"doc-is-{v}", v.encode()) for v in NOT_OBJECTS]
    for key in doc:
        bad = {**doc, key: _swapped(doc[key])}
        found.append(Damage(f"{key}-type", json.dumps(bad).encode(), True))
    return found


def csv_damage(valid: bytes) -> list[Damage]:
    """A record short of a column, and a quote left open."""
    rows = list(csv.reader(io.StringIO(valid.decode("utf-8"), newline="")))
    rows[2] = rows[2][:-1]
    short = io.StringIO(newline="")
    csv.writer(short).writerows(rows)
    return [
        Damage("short-row", short.getvalue().encode("utf-8")),
        Damage("open-quote", valid + b'"never closed,' + b"x" * 50 + b"\n", True),
    ]


# -- the server and the valid inputs ---------------------------------------------------------
@pytest.fixture(scope="module")
def server(data_dir: Path) -> Iterator[ServerThread]:
    global SHARED
    SHARED = data_dir
    fake = FakeOpenAI(responder=lambda body: "True", model_ids=MODELS, record_requests=False)
    thread = ServerThread(fake.app()).start()
    yield thread
    thread.stop()


@pytest.fixture(autouse=True)
def _key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    monkeypatch.delenv("HPT_DATA_DIR", raising=False)


@dataclass
class Outcome:
    code: int
    out: str
    err: str


def invoke(argv: list[str], capsys: pytest.CaptureFixture[str]) -> Outcome:
    """``hpt ARGV`` in this process; an exception out of main() is a traceback a user sees."""
    capsys.readouterr()
    try:
        code = main([str(a) for a in argv])
    except SystemExit as exc:  # argparse
        code = exc.code if isinstance(exc.code, int) else 1
    except Exception:  # what a user would see as a traceback
        captured = capsys.readouterr()
        raised = traceback.format_exc().strip().splitlines()
        return Outcome(-1, captured.out, f"{captured.err}Traceback: {raised[-1]}")
    captured = capsys.readouterr()
    return Outcome(code, captured.out, captured.err)


def assert_one_line_error(outcome: Outcome, what: str) -> None:
    lines = outcome.err.strip().splitlines()
    assert "Traceback" not in outcome.err, f"{what}: {outcome.err}"
    assert outcome.code == 2, f"{what}: exit {outcome.code}, stderr: {outcome.err}"
    assert len(lines) == 1 and lines[0].startswith("hpt: error: "), f"{what}: {outcome.err!r}"


def assert_answered(outcome: Outcome, damage: Damage, file: Path, lenient: bool = False) -> None:
    """Exit 2 with one error line naming the file; exit 0 too where the damage may leave a
    valid file, or the file is one whose damaged entries are made again (``lenient``)."""
    what = f"{file.name} ({damage.name})"
    if (damage.may_pass or lenient) and outcome.code == 0:
        assert "Traceback" not in outcome.err, f"{what}: {outcome.err}"
        return
    assert_one_line_error(outcome, what)
    if not damage.may_pass:  # what is left of a cut file may fail elsewhere, rightly
        assert file.name in outcome.err, f"{what}: the error does not name the file"


def run_argv(
    server: ServerThread, out: Path, *extra: object, model: str = "openai:test-model"
) -> list[object]:
    return ["run", "--model", model, "--base-url", server.base_url, "--limit", "1",
            "--out", out, "--no-progress", *extra]  # fmt: skip


# -- run directories, made by real runs -------------------------------------------------------
@pytest.fixture(scope="module")
def runs(server: ServerThread, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Finished runs: boolq by two models, and DepthQA (for agreement)."""
    root = tmp_path_factory.mktemp("runs")
    made = {"cache": root / "cache"}
    with pytest.MonkeyPatch.context() as env:  # not the user's own cache
        env.setenv("HPT_CACHE_DIR", str(made["cache"]))
        env.setenv("OPENAI_API_KEY", "test-key")
        _make_runs(server, root, made)
    return made


def _make_runs(server: ServerThread, root: Path, made: dict[str, Path]) -> None:
    for name, dataset, model, *extra in [
        ("boolq", "boolq", MODELS[0]), ("other", "boolq", MODELS[1]),
        ("depthqa", "depthqa", MODELS[0]),
        ("single", "boolq", MODELS[0], "--strategies", "role"),  # a method, for ceiling
    ]:  # fmt: skip
        out = root / name
        argv = run_argv(server, out, "--dataset", dataset, "--data-dir", SHARED, "--limit", "2",
                        *extra, model=f"openai:{model}")  # fmt: skip
        code = main([str(a) for a in argv])
        assert code == 0 and (out / "samples.jsonl").is_file()
        made[name] = out


def damaged_copy(source: Path, dest: Path, name: str, data: bytes) -> Path:
    shutil.copytree(source, dest)
    (dest / name).write_bytes(data)
    return dest


# -- the cases: a file, how to damage it, and the command that reads it -----------------------
@dataclass(frozen=True)
class Case:
    """``argv(tmp, file)`` reads the damaged ``file``; ``setup(tmp)`` makes the valid one."""

    name: str
    setup: Callable[[Path, ServerThread, dict[str, Path]], Path]
    argv: Callable[[Path, Path, ServerThread, dict[str, Path]], list[object]]
    damage: Callable[[bytes], list[Damage]]
    # A file whose damage is passed over (hpt's own logs and caches): exit 0, or an error
    # naming the file where what is left contradicts the run.
    lenient: bool = False


def _all(*makers: Callable[[bytes], list[Damage]]) -> Callable[[bytes], list[Damage]]:
    return lambda valid: [d for make in makers for d in make(valid)]


def _bytes(salt: str) -> Callable[[bytes], list[Damage]]:
    return lambda valid: byte_damage(valid, salt)


# Run configs
CONFIG_TOML = """\
[run]
seed = 1
concurrency = 2
strategies = ["role", "zero_shot_cot"]

[run.params]
temperature = 0.5

[models.fake]
provider = "openai"
model = "test-model"
endpoints = ["{url}"]
"""
CONFIG_YAML = """\
run:
  seed: 1
  concurrency: 2
  strategies: [role, zero_shot_cot]
  params: {{temperature: 0.5}}
models:
  fake: {{provider: openai, model: test-model, endpoints: ["{url}"]}}
"""
TOML_TYPES = [
    'run = 5\n', '[run]\nlimit = "x"\n', '[run]\ndataset = 5\n', '[run]\nparams = [1]\n',
    '[run]\nstrategies = 3\n', '[run]\nmodels = 1\n', 'models = "m"\n', '[models.m]\nprovider = 7\n',
    '[models.m]\nprovider = "openai"\nmodel = 7\n', '[models.m]\nprovider = "nosuch"\n',
    'other = 1\n', '[run]\nthreshold = [2.0]\n', '[run]\nout = 1\n',
]  # fmt: skip
YAML_TYPES = [
    "- a\n- b\n", "just text\n", "run: 5\n", "run: {limit: [1]}\n", "run: {1: 2}\n",
    "run: {seed: 2020-01-01}\n", "models: {m: 3}\n", "? [a, b]\n: 1\n", "run: !!python/object:os.system {}\n",
    "run: &a [*a]\n", "models: {m: {provider: [openai]}}\n", "run: {models: {}}\n",
]  # fmt: skip


def _config(suffix: str, text: str) -> Callable[[Path, ServerThread, dict[str, Path]], Path]:
    def setup(tmp: Path, server: ServerThread, runs: dict[str, Path]) -> Path:
        path = tmp / f"config{suffix}"
        path.write_text(text.format(url=server.base_url), encoding="utf-8")
        return path

    return setup


def _config_argv(tmp: Path, file: Path, server: ServerThread, runs: dict[str, Path]) -> list:
    return ["run", "--config", file, "--dataset", "boolq", "--model", "fake", "--data-dir",
            SHARED, "--limit", "1", "--out", tmp / "out", "--no-progress"]  # fmt: skip


def _texts(texts: list[str]) -> Callable[[bytes], list[Damage]]:
    return lambda valid: [Damage(f"types-{i}", t.encode()) for i, t in enumerate(texts)]


# Datasets: a data directory holding one dataset (a small valid copy of the shared file)
def _head(relative: str, lines: int) -> bytes:
    with (SHARED / relative).open("rb") as fh:
        return b"".join(fh.readline() for _ in range(lines))


def _dataset(
    dataset: str, relative: str, make: Callable[[], bytes], *others: str
) -> Callable[[Path, ServerThread, dict[str, Path]], Path]:
    """A data directory with ``relative`` made by ``make`` and ``others`` copied whole."""

    def setup(tmp: Path, server: ServerThread, runs: dict[str, Path]) -> Path:
        data = tmp / "data"
        for other in others:
            (data / other).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(SHARED / other, data / other)
        path = data / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(make())
        return path

    return setup


def _data_argv(dataset: str) -> Callable[[Path, Path, ServerThread, dict[str, Path]], list]:
    def argv(tmp: Path, file: Path, server: ServerThread, runs: dict[str, Path]) -> list:
        return run_argv(server, tmp / "out", "--dataset", dataset, "--data-dir", tmp / "data")

    return argv


def _gz_lines(relative: str, lines: int) -> Callable[[], bytes]:
    def make() -> bytes:
        with gzip.open(SHARED / relative, "rb") as fh:
            return gzip.compress(b"".join(fh.readline() for _ in range(lines)), mtime=0)

    return make


def _gz_content(valid: bytes) -> list[Damage]:
    """The decompressed text damaged, compressed again."""
    inner = gzip.decompress(valid)
    return [
        Damage(f"inner-{d.name}", gzip.compress(d.data, mtime=0), d.may_pass)
        for d in [*byte_damage(inner, "gz"), *jsonl_type_damage(inner)]
    ]


def _gpqa_zip() -> bytes:
    """The released archive's CSV, in an archive without a password (hpt passes the password
    to zipfile, which ignores it for members not encrypted)."""
    import hpt.tasks.gpqa as gpqa

    with zipfile.ZipFile(SHARED / "gpqa/gpqa_diamond.zip") as archive:
        member = next(i for i in archive.infolist() if i.filename.endswith(".csv"))
        text = archive.read(member, pwd=gpqa.PASSWORD)
    return _zip_of(member.filename, text)


def _zip_of(name: str, content: bytes) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr(name, content)
    return buffer.getvalue()


def _zip_content(valid: bytes) -> list[Damage]:
    with zipfile.ZipFile(io.BytesIO(valid)) as archive:
        name = archive.namelist()[0]
        inner = archive.read(name)
    return [
        Damage(f"inner-{d.name}", _zip_of(name, d.data), d.may_pass)
        for d in [*byte_damage(inner, "zip"), *csv_damage(inner)]
    ]


def _tgz_content(valid: bytes) -> list[Damage]:
    """Each XML file inside the archive damaged, archived again."""
    found = []
    with tarfile.open(fileobj=io.BytesIO(valid), mode="r:gz") as tar:
        members = [(m, tar.extractfile(m)) for m in tar.getmembers()]
        files = {m.name: (m, h.read() if h else None) for m, h in members}
    xml = next(n for n in files if n.endswith(".xml"))
    for d in byte_damage(files[xml][1] or b"", "tgz"):
        buffer = io.BytesIO()
        with tarfile.open(fileobj=buffer, mode="w:gz") as out:
            for name, (member, content) in files.items():
                if content is None:
                    out.addfile(member)
                    continue
                data = d.data if name == xml else content
                member.size = len(data)
                out.addfile(member, io.BytesIO(data))
        found.append(Damage(f"inner-{d.name}", buffer.getvalue(), d.may_pass))
    return found


def _copy(relative: str) -> Callable[[], bytes]:
    return lambda: (SHARED / relative).read_bytes()


def _lines(relative: str, n: int) -> Callable[[], bytes]:
    return lambda: _head(relative, n)


JSONL = _all(_bytes("jsonl"), jsonl_type_damage)
CSV = _all(_bytes("csv"), csv_damage)
MMLU_DEV = [f"mmlu/dev/{s}_dev.csv" for s in ("abstract_algebra",)]

DATASET_CASES = [
    Case("boolq", _dataset("boolq", "boolq/validation.jsonl", _lines("boolq/validation.jsonl", 40)),
         _data_argv("boolq"), JSONL),
    Case("csqa-dev", _dataset("csqa", "csqa/dev_rand_split.jsonl",
                              _lines("csqa/dev_rand_split.jsonl", 30), "csqa/train_rand_split.jsonl"),
         _data_argv("csqa"), JSONL),
    Case("csqa-train", _dataset("csqa", "csqa/train_rand_split.jsonl",
                                _lines("csqa/train_rand_split.jsonl", 400),
                                "csqa/dev_rand_split.jsonl"),
         _data_argv("csqa"), JSONL),
    Case("gsm8k-test", _dataset("gsm8k", "gsm8k/test.jsonl", _lines("gsm8k/test.jsonl", 30),
                                "gsm8k/train.jsonl"), _data_argv("gsm8k"), JSONL),
    Case("gsm8k-train", _dataset("gsm8k", "gsm8k/train.jsonl", _lines("gsm8k/train.jsonl", 60),
                                 "gsm8k/test.jsonl"), _data_argv("gsm8k"), JSONL),
    Case("mmlu-test", _dataset("mmlu", "mmlu/test/abstract_algebra_test.csv",
                               _copy("mmlu/test/abstract_algebra_test.csv"), *MMLU_DEV),
         _data_argv("mmlu"), CSV),
    Case("mmlu-dev", _dataset("mmlu", MMLU_DEV[0], _copy(MMLU_DEV[0]),
                              "mmlu/test/abstract_algebra_test.csv"), _data_argv("mmlu"), CSV),
    Case("mmlu_pro", _dataset("mmlu_pro", "mmlu_pro/test.jsonl", _lines("mmlu_pro/test.jsonl", 300)),
         _data_argv("mmlu_pro"), JSONL),
    Case("samsum-test", _dataset("samsum", "samsum/test.csv", _lines("samsum/test.csv", 60),
                                 "samsum/val.csv"), _data_argv("samsum"), CSV),
    Case("samsum-val", _dataset("samsum", "samsum/val.csv", _lines("samsum/val.csv", 60),
                                "samsum/test.csv"), _data_argv("samsum"), CSV),
    Case("medcalc", _dataset("medcalc", "medcalc/test_data.csv", _copy("medcalc/test_data.csv")),
         _data_argv("medcalc"), CSV),
    Case("depthqa", _dataset("depthqa", "depthqa/questions.jsonl",
                             _lines("depthqa/questions.jsonl", 40)), _data_argv("depthqa"), JSONL),
    Case("gpqa", _dataset("gpqa", "gpqa/gpqa_diamond.zip", _gpqa_zip), _data_argv("gpqa"),
         _all(_bytes("zip"), _zip_content)),
    Case("iwslt-en", _dataset("iwslt", "iwslt2017/en-fr.tgz", _copy("iwslt2017/en-fr.tgz"),
                              "iwslt2017/fr-en.tgz"), _data_argv("iwslt"),
         _all(_bytes("tgz"), _tgz_content)),
    Case("humaneval", _dataset("humaneval", "humaneval/HumanEval.jsonl.gz",
                               _gz_lines("humaneval/HumanEval.jsonl.gz", 20)),
         _data_argv("humaneval"), _all(_bytes("gz"), _gz_content)),
]  # fmt: skip


# A question graph (run --graph) and decompose's questions
def _graph(name: str) -> Callable[[Path, ServerThread, dict[str, Path]], Path]:
    def setup(tmp: Path, server: ServerThread, runs: dict[str, Path]) -> Path:
        return make_graph_dir(tmp / "graph") / name

    return setup


def _graph_argv(tmp: Path, file: Path, server: ServerThread, runs: dict[str, Path]) -> list:
    return run_argv(server, tmp / "out", "--dataset", "depthqa", "--graph", tmp / "graph")


def _questions(tmp: Path, server: ServerThread, runs: dict[str, Path]) -> Path:
    path = tmp / "questions.jsonl"
    path.write_bytes(_head("depthqa/questions.jsonl", 1600))
    return path


def _decompose_argv(tmp: Path, file: Path, server: ServerThread, runs: dict[str, Path]) -> list:
    return ["decompose", "--questions", file, "--model", "openai:test-model", "--base-url",
            server.base_url, "--out", tmp / "graph", "--limit", "1"]  # fmt: skip


def _decompose_log(name: str) -> Callable[[Path, ServerThread, dict[str, Path]], Path]:
    """A finished graph build's own log, to be damaged before the build runs again."""

    def setup(tmp: Path, server: ServerThread, runs: dict[str, Path]) -> Path:
        questions = _questions(tmp, server, runs)
        assert main([str(a) for a in _decompose_argv(tmp, questions, server, runs)]) == 0
        return tmp / "graph" / name

    return setup


def _decompose_again(tmp: Path, file: Path, server: ServerThread, runs: dict[str, Path]) -> list:
    return [*_decompose_argv(tmp, tmp / "questions.jsonl", server, runs), "--resume"]


# Run directories: the records and the description every reader takes
def _run_file(run: str, name: str) -> Callable[[Path, ServerThread, dict[str, Path]], Path]:
    def setup(tmp: Path, server: ServerThread, runs: dict[str, Path]) -> Path:
        shutil.copytree(runs[run], tmp / run)
        return tmp / run / name

    return setup


def _reader(*argv: object) -> Callable[[Path, Path, ServerThread, dict[str, Path]], list]:
    """``hpt ARGV DIR``, with ``{out}`` for a fresh output path."""

    def make(tmp: Path, file: Path, server: ServerThread, runs: dict[str, Path]) -> list:
        shown = [tmp / "out" if a == "{out}" else a for a in argv]
        return [*shown[:1], file.parent, *shown[1:]]

    return make


def _two(
    command: str, *argv: object
) -> Callable[[Path, Path, ServerThread, dict[str, Path]], list]:
    """``hpt COMMAND DIR OTHER ARGV``: the damaged run beside an intact one."""

    def make(tmp: Path, file: Path, server: ServerThread, runs: dict[str, Path]) -> list:
        other = runs["depthqa"] if file.parent.name == "depthqa" else runs["other"]
        shown = [tmp / "out" if a == "{out}" else a for a in argv]
        return [command, file.parent, other, *shown]

    return make


def _resume(tmp: Path, file: Path, server: ServerThread, runs: dict[str, Path]) -> list:
    return ["run", "--resume", file.parent, "--no-progress"]


RECORDS = _all(_bytes("records"), jsonl_type_damage)
SPEC = _all(_bytes("spec"), json_type_damage)
RUN_DIR_CASES = [
    Case(f"{command}-{short}", _run_file(run, name), argv, damage)
    for command, run, argv, files in [
        ("summarize", "boolq", _reader("summarize"), "records spec"),
        ("report", "boolq", _reader("report", "--no-plots", "--out", "{out}"), "records spec"),
        ("view", "boolq", _reader("view", "--no-open", "--out", "{out}"), "records"),
        ("ceiling", "single", _reader("ceiling", "--baseline", "role", "--no-plots", "--out", "{out}"),
         "records spec"),
        ("compare", "boolq", _two("compare", "--no-plots", "--out", "{out}"), "records spec"),
        ("agreement", "depthqa", _two("agreement"), "records"),
        ("resume", "boolq", _resume, "records spec"),
    ]
    for short, name, damage in [("records", "samples.jsonl", RECORDS), ("spec", "run.json", SPEC)]
    if short in files
]  # fmt: skip


# Other files commands take
PRICES = '["openai:test-model"]\ninput = 2.5\noutput = 10\n\n["openai:other-model"]\ninput = 1\noutput = 2\n'
PRICE_TYPES = [
    "x = 1\n",
    '["openai:test-model"]\ninput = "cheap"\n',
    '["m"]\ninput = [1]\n',
    '["m"]\ninput = -1\noutput = 1\n',
    "[m.x]\ny = 1\n",
    '["m"]\ninput = nan\noutput = 1\n',
]
SCORES = (
    "model,benchmark,method,accuracy,n\nm1,mmlu_pro,baseline,50.0,100\nm1,mmlu_pro,cot,60.0,100\n"
    "m2,mmlu_pro,baseline,55.0,100\nm2,mmlu_pro,cot,52.0,100\n"
)
SCORE_TYPES = [
    "model,benchmark\nm,b\n",
    "model,benchmark,method,accuracy\nm,b,x,high\n",
    "model,benchmark,method,accuracy,n\nm,b,x,50,many\n",
    "model,benchmark,method,accuracy\nm,b,x,150\n",
    "model,benchmark,method,accuracy\nm,b,x,nan\n",
]
ANNOTATION = {
    "dataset": "boolq",
    "sample_id": "s1",
    "annotator": "ann",
    "kind": "human",
    "scores": {"reproduction": 2, "interpretation": 3, "reasoning": 1, "application": 2},
}


PROGRAM = {"self": {"signature": {"instructions": "Answer the question.", "fields": []},
                    "demos": []}}  # fmt: skip


def _program_argv(tmp: Path, file: Path, server: ServerThread, runs: dict[str, Path]) -> list:
    # A penalty set by hand: no note precedes the error line.
    return run_argv(server, tmp / "out", "--dataset", "mmlu_pro", "--data-dir", SHARED,
                    "--penalty", "3", "--strategies", "dspy_predict", "--program",
                    f"dspy_predict={file}")  # fmt: skip


def _run_annotations_argv(
    tmp: Path, file: Path, server: ServerThread, runs: dict[str, Path]
) -> list:
    return run_argv(server, tmp / "out", "--dataset", "boolq", "--data-dir", SHARED,
                    "--strategies", "role", "--annotations", file.parent)  # fmt: skip


def _write(name: str, text: str) -> Callable[[Path, ServerThread, dict[str, Path]], Path]:
    def setup(tmp: Path, server: ServerThread, runs: dict[str, Path]) -> Path:
        path = tmp / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        return path

    return setup


def _prices_argv(tmp: Path, file: Path, server: ServerThread, runs: dict[str, Path]) -> list:
    return ["report", runs["boolq"], "--prices", file, "--no-plots", "--out", tmp / "out"]


def _scores_argv(tmp: Path, file: Path, server: ServerThread, runs: dict[str, Path]) -> list:
    return [
        "ceiling",
        "--scores",
        file,
        "--baseline",
        "baseline",
        "--no-plots",
        "--out",
        tmp / "out",
    ]


def _annotate_argv(tmp: Path, file: Path, server: ServerThread, runs: dict[str, Path]) -> list:
    return ["annotate", "boolq", "--summary", "--out", file.parent, "--data-dir", SHARED]


def _cache_argv(action: str) -> Callable[[Path, Path, ServerThread, dict[str, Path]], list]:
    return lambda tmp, file, server, runs: ["cache", action, "--path", file]


def _cache_file(tmp: Path, server: ServerThread, runs: dict[str, Path]) -> Path:
    shutil.copytree(runs["cache"], tmp / "cache")
    from hpt.backends.cache import CACHE_FILE

    return tmp / "cache" / CACHE_FILE


def _judge_argv(tmp: Path, file: Path, server: ServerThread, runs: dict[str, Path]) -> list:
    return ["judge-strategies", "--model", "openai:test-model", "--base-url", server.base_url,
            "--datasets", "boolq", "--strategies", "role", "--per-dataset", "1",
            "--data-dir", tmp / "data", "--out", tmp / "out"]  # fmt: skip


def _judge_config_argv(tmp: Path, file: Path, server: ServerThread, runs: dict[str, Path]) -> list:
    return ["judge-strategies", "--config", file, "--model", "fake", "--datasets", "boolq",
            "--strategies", "role", "--per-dataset", "1", "--data-dir", SHARED, "--out",
            tmp / "out"]  # fmt: skip


TOML_DAMAGE = _all(_bytes("toml"), _texts(TOML_TYPES))
YAML_DAMAGE = _all(_bytes("yaml"), _texts(YAML_TYPES))
OTHER_CASES = [
    Case("config-toml", _config(".toml", CONFIG_TOML), _config_argv, TOML_DAMAGE),
    Case("config-yaml", _config(".yaml", CONFIG_YAML), _config_argv, YAML_DAMAGE),
    Case("judge-config", _config(".toml", CONFIG_TOML), _judge_config_argv, TOML_DAMAGE),
    Case("judge-data", _dataset("boolq", "boolq/validation.jsonl",
                                _lines("boolq/validation.jsonl", 40)), _judge_argv, JSONL),
    *(Case(f"graph-{name.split('.')[0]}", _graph(name), _graph_argv, JSONL)
      for name in ("questions.jsonl", "nodes.jsonl", "node_to_q.jsonl")),
    Case("decompose-questions", _questions, _decompose_argv, JSONL),
    *(Case(f"decompose-{name.split('.')[0]}", _decompose_log(name), _decompose_again, JSONL,
           lenient=True)
      for name in ("decompose_state.jsonl", "decompose_replies.jsonl")),
    Case("report-prices", _write("prices.toml", PRICES), _prices_argv,
         _all(_bytes("prices"), _texts(PRICE_TYPES))),
    Case("ceiling-scores", _write("scores.csv", SCORES), _scores_argv,
         _all(_bytes("scores"), _texts(SCORE_TYPES))),
    Case("annotations", _write("annotations/boolq.jsonl", json.dumps(ANNOTATION) + "\n"),
         _annotate_argv, JSONL),
    Case("run-annotations", _write("annotations/boolq.jsonl", json.dumps(ANNOTATION) + "\n"),
         _run_annotations_argv, JSONL),
    Case("program", _write("program.json", json.dumps(PROGRAM)), _program_argv,  # slow: few
         lambda valid: [d for d in _all(_bytes("program"), json_type_damage)(valid)
                        if d.name in ("random-bytes", "not-utf8", "empty", "doc-is-[]", "self-type")]),
    Case("cache-stats", _cache_file, _cache_argv("stats"), _bytes("cache")),
    # hpt cache clear removes a damaged cache, saying so (exit 0).
    Case("cache-clear", _cache_file, _cache_argv("clear"), _bytes("cache"), lenient=True),
]  # fmt: skip
CASES = [*OTHER_CASES, *DATASET_CASES, *RUN_DIR_CASES]


@pytest.mark.parametrize("case", [pytest.param(c, id=c.name) for c in CASES])
def test_damaged_file_is_one_error_line(
    case: Case, server: ServerThread, runs: dict[str, Path], tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    valid_dir = tmp_path / "valid"
    valid_dir.mkdir()
    file = case.setup(valid_dir, server, runs)
    # The intact file is accepted: what fails below is the damage.
    intact = invoke(case.argv(valid_dir, file, server, runs), capsys)
    assert intact.code == 0, f"{case.name}, intact: {intact.err}"
    failures = []
    for i, damage in enumerate(case.damage(file.read_bytes())):
        tmp = tmp_path / str(i)
        tmp.mkdir()
        file = case.setup(tmp, server, runs)
        file.write_bytes(damage.data)
        outcome = invoke(case.argv(tmp, file, server, runs), capsys)
        try:
            assert_answered(outcome, damage, file, lenient=case.lenient)
        except AssertionError as exc:
            failures.append(" ".join(str(exc).split())[:400])
    assert not failures, f"{len(failures)} answered wrongly:\n" + "\n".join(failures)


# -- ports, and the net under every reader ---------------------------------------------------
@pytest.mark.parametrize(
    "argv",
    [["view", "RUN", "--serve", "--port", "70000"], ["view", "RUN", "--serve", "--port", "-1"],
     ["annotate", "boolq", "--port", "65536"], ["annotate", "boolq", "--port", "http"]],
)  # fmt: skip
def test_a_port_out_of_range_is_a_usage_error(
    argv: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    outcome = invoke([str(tmp_path) if a == "RUN" else a for a in argv], capsys)
    last = outcome.err.strip().splitlines()[-1]
    assert outcome.code == 2 and "Traceback" not in outcome.err
    assert "error: argument --port:" in last and "0-65535" in last


def _raising(exc: Exception) -> Callable[..., int]:
    def command(*args: object) -> int:
        raise exc

    return command


def test_a_decode_error_no_reader_caught_is_still_one_line(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import hpt.cli.main as cli

    bad = UnicodeDecodeError("utf-8", b"\xff", 0, 1, "invalid start byte")
    monkeypatch.setitem(cli.COMMANDS, "view", _raising(bad))
    assert_one_line_error(invoke(["view", tmp_path], capsys), "a stray UnicodeDecodeError")


def test_a_bug_is_one_line_naming_the_saved_traceback(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import tempfile

    import hpt.cli.main as cli

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    monkeypatch.setitem(cli.COMMANDS, "view", _raising(RuntimeError("no such state")))
    outcome = invoke(["view", tmp_path], capsys)
    lines = outcome.err.strip().splitlines()
    assert outcome.code == 1 and len(lines) == 1, outcome.err
    assert lines[0].startswith("hpt: error: unexpected RuntimeError: no such state")
    (saved,) = tmp_path.glob("hpt-error-*.txt")
    assert str(saved) in lines[0]
    assert "Traceback" in saved.read_text() and "RuntimeError: no such state" in saved.read_text()
    # For developers: the traceback itself.
    monkeypatch.setenv("HPT_DEBUG", "1")
    with pytest.raises(RuntimeError, match="no such state"):
        main(["view", str(tmp_path)])


def test_a_damaged_embedding_cache_is_one_error_naming_it(tmp_path: Path) -> None:
    import asyncio

    import numpy as np

    from hpt.backends import CacheError
    from hpt.backends.embeddings import EmbeddingCache

    path = tmp_path / "embeddings.sqlite3"
    cache = EmbeddingCache(path)
    rows = [(f"k{i}", "m", np.full(64, i, dtype=np.float32)) for i in range(400)]
    asyncio.run(cache.put_many(rows))
    valid = path.read_bytes()
    page = 4096  # damage a page of rows, past the header the connection checks
    for damage in [*byte_damage(valid, "embeddings"),
                   Damage("page", valid[:page] + b"\xff" * page + valid[2 * page :])]:  # fmt: skip
        path.write_bytes(damage.data)
        try:
            asyncio.run(cache.get_many([key for key, _, _ in rows]))
        except CacheError as exc:
            assert str(path) in str(exc), damage.name


@pytest.mark.parametrize(
    "url",
    ["htp://h/v1", "http://[::1/v1", "http://127.0.0.1:99999/v1", "http://", "127.0.0.1:8080/v1",
     "http://127.0.0.1:port/v1", "http://u:pw-24-secret@[::1/v1"],
)  # fmt: skip
def test_a_malformed_endpoint_is_one_error_line(
    url: str, data_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for argv in (["--model", "openai:m", "--base-url", url], ["--model", f"tgi:{url}"]):
        outcome = invoke(["run", "--dataset", "boolq", "--data-dir", data_dir, *argv,
                          "--out", tmp_path / "out"], capsys)  # fmt: skip
        assert_one_line_error(outcome, url)
        assert "pw-24-secret" not in outcome.err
