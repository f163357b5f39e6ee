"""Runs over Ray workers (``hpt run --ray``) on a local Ray of this machine's 2 CPUs, started
once for the module: the records equal a single process's, a worker killed mid-run leaves
every sample recorded once, a --rpm holds across the workers, a cancelled run resumes, and
what workers cannot do is refused before anything is written."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator, Mapping
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import httpx
import pytest

from hpt.backends import FatalBackendError
from hpt.cli.common import EXIT_INTERRUPTED
from hpt.orchestrator import RunSpec, ray_driver, run_evaluation
from hpt.orchestrator.observer import SilentObserver, WorkerStats
from hpt.orchestrator.penalties import run_penalties
from hpt.orchestrator.planning import plan_cells
from hpt.orchestrator.ray_driver import RAY_HINT, RayCampaign, _Slot
from hpt.orchestrator.ray_worker import NodeServer
from hpt.orchestrator.resume import load_saved_spec
from hpt.orchestrator.spec import ConfigError
from hpt.results.reader import read_records
from hpt.results.records import Attempt, SampleRecord, parse_record_json
from hpt.results.tally import Tally
from tests.backend_helpers import FAST_RETRY, serving
from tests.conftest import interruptible
from tests.run_faults import env, run_cmd, wait_until
from tests.run_fixtures import make_record
from tests.servers.answer_key import KeyedResponder
from tests.servers.openai_compat import FakeOpenAI
from tests.test_cli import hpt
from tests.test_depthqa_runs import Scripted, write_graph
from tests.test_plugins import PLUGIN, PROMPTS, _check_run, _write_plugin

ray = pytest.importorskip("ray")

MODEL = "openai:test-model"
# Ray's workers read the environment Ray was started with, not a test's monkeypatching.
RAY_ENV = {"RAY_USAGE_STATS_ENABLED": "0", "RAY_AUTH_MODE": "disabled",
           "OPENAI_API_KEY": "test-key"}  # fmt: skip


@pytest.fixture(scope="module", autouse=True)
def local_ray(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    before = {k: os.environ.get(k) for k in [*RAY_ENV, "HPT_CACHE_DIR"]}
    os.environ.update(RAY_ENV, HPT_CACHE_DIR=str(tmp_path_factory.mktemp("ray-cache")))
    ray.init(num_cpus=2, include_dashboard=False, object_store_memory=100 * 2**20,
             log_to_driver=False)  # fmt: skip
    try:
        yield
    finally:
        ray.shutdown()
        for k, v in before.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def _spec(out: Path, data_dir: Path, base_url: str, **extra: Any) -> RunSpec:
    return RunSpec.model_validate(
        {"dataset": "boolq", "model": MODEL, "limit": 24, "concurrency": 3, "cache": False,
         "data_dir": data_dir, "out": out, "base_url": base_url, "retry": FAST_RETRY, **extra}
    )  # fmt: skip


def _without_timings(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _without_timings(v) for k, v in value.items()
                if "wall" not in str(k) and "latency" not in str(k)}  # fmt: skip
    if isinstance(value, list):
        return [_without_timings(v) for v in value]
    return value


def _records(out: Path) -> list[dict[str, Any]]:
    records = [_without_timings(r.model_dump(mode="json")) for r in read_records(out)]
    return sorted(records, key=lambda r: json.dumps([r["dataset"], r["threshold"],
                                                     r["sample_id"], r["draw"]]))  # fmt: skip


def _ray_actors() -> list[str]:
    return [a["name"] for a in ray.util.list_named_actors(all_namespaces=True)
            if a["name"].startswith("hpt-")]  # fmt: skip


class Workers(SilentObserver):
    """Keeps the workers' live stats, counts the records told and the attempts heard."""

    def __init__(self) -> None:
        self.workers: Mapping[str, WorkerStats] = {}
        self.told = 0
        self.heard: Counter[tuple[str, int, bool]] = Counter()

    def attempted(self, tally: Tally, attempt: Attempt) -> None:
        self.heard[(tally.cell.title, attempt.level, attempt.resolved)] += 1

    def watch_workers(self, workers: Mapping[str, WorkerStats]) -> None:
        self.workers = workers

    def recorded(self, record: SampleRecord, tally: Tally) -> None:
        self.told += 1


async def test_records_equal_a_single_process_run(
    boolq_answers: dict[str, str], data_dir: Path, tmp_path: Path
) -> None:
    # BoolQ resolved from the second level; SAMSum's two thresholds climb together.
    fake = FakeOpenAI(KeyedResponder(boolq_answers, "zero_shot_cot"))
    with serving(fake.app()) as srv:
        settings = {"dataset": ["boolq", "samsum"], "samples_per_task": 2, "limit": 10}
        one = _spec(tmp_path / "one", data_dir, srv.base_url, **settings)
        heard = Workers()
        alone = await run_evaluation(one, heard)
        observer = Workers()
        spread = await run_evaluation(
            _spec(tmp_path / "ray", data_dir, srv.base_url, ray="", workers=2, **settings),
            observer,
        )
    assert spread.complete and alone.complete
    assert _records(tmp_path / "ray") == _records(tmp_path / "one")
    assert [_without_timings(s.model_dump()) for s in spread.summaries] == [
        _without_timings(s.model_dump()) for s in alone.summaries
    ]
    # run.json as a single process writes it: how the run was executed is not saved.
    saved = [json.loads((tmp_path / d / "run.json").read_text()) for d in ("one", "ray")]
    for key in ("generation", "dataset", "params", "tasks"):
        assert saved[0][key] == saved[1][key]
    assert "ray" not in saved[1] and "workers" not in saved[1]
    assert observer.told == 10 * 2 * 3  # boolq + samsum at two thresholds, two draws each
    # Each level as it finished, heard from the workers as in one process.
    assert observer.heard == heard.heard and heard.heard.total() > 60
    assert sorted(w.samples for w in observer.workers.values()) != [0, 60]  # both worked
    assert sum(w.samples for w in observer.workers.values()) == 60
    assert {w.state for w in observer.workers.values()} == {"stopped"}
    assert _ray_actors() == []


class Killer(Workers):
    """Kills the first worker once ``after`` records were told; notes when a worker starts
    in its place (seen as records land)."""

    def __init__(self, after: int) -> None:
        super().__init__()
        self.after = after
        self.killed_at = self.back_at = 0.0
        self._dead = False

    def recorded(self, record: SampleRecord, tally: Tally) -> None:
        super().recorded(record, tally)
        state = self.workers["worker 1"].state
        if self.told == self.after:
            ray.kill(ray.get_actor("hpt-worker-1.1"), no_restart=True)
            self.killed_at = time.monotonic()
        elif self.killed_at and state == "dead":
            self._dead = True
        elif self._dead and not self.back_at:
            self.back_at = time.monotonic()


async def test_a_worker_killed_mid_run_is_replaced_and_every_sample_is_recorded_once(
    boolq_answers: dict[str, str], data_dir: Path, tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    """Under a per-minute limit, the replacement (given the dead worker's share) starts
    only once the dead one's last minute is over (here made 5 s)."""
    monkeypatch.setattr(ray_driver, "LIMIT_WINDOW_S", 5.0)
    fake = FakeOpenAI(KeyedResponder(boolq_answers, "zero_shot_cot"), delay_s=0.3)
    observer = Killer(after=6)
    with serving(fake.app()) as srv:
        spec = _spec(tmp_path / "run", data_dir, srv.base_url, ray="", workers=2, limit=60,
                     requests_per_minute=10**6)  # fmt: skip
        result = await run_evaluation(spec, observer)
    assert result.complete
    ids = [r.sample_id for r in read_records(tmp_path / "run")]
    assert len(ids) == len(set(ids)) == 60
    assert result.summary.samples == 60
    first = observer.workers["worker 1"]
    assert first.restarts == 1  # its place was filled again
    assert observer.back_at, "no worker took the dead one's place while records landed"
    assert observer.back_at - observer.killed_at >= 5.0
    assert observer.told == 60
    assert _ray_actors() == []


async def test_a_shared_rpm_holds_across_workers_and_a_cancelled_run_resumes(
    data_dir: Path, tmp_path: Path
) -> None:
    """120 requests a minute over two workers: each keeps 60, so in the seconds the run
    lasts the server sees at most 120 calls (each worker with the whole limit would send
    240); then the run is cancelled, as Ctrl-C does, and resumes in one process."""
    seen: list[float] = []
    lock, reached = threading.Lock(), threading.Event()

    def unsure(body: dict[str, Any]) -> str:
        with lock:
            seen.append(time.monotonic())
            if len(seen) >= 120:
                reached.set()
        return "I am not sure how to answer that."  # every sample climbs every level

    fake = FakeOpenAI(unsure)
    out = tmp_path / "run"
    with serving(fake.app()) as srv:
        spec = _spec(out, data_dir, srv.base_url, ray="", workers=2, limit=60, concurrency=8,
                     requests_per_minute=120)  # fmt: skip
        run = asyncio.create_task(run_evaluation(spec))
        await asyncio.to_thread(reached.wait, 60)
        await asyncio.sleep(3)  # what a worker holding the whole limit would send meanwhile
        run.cancel()
        with pytest.raises(asyncio.CancelledError):
            await run
        assert _ray_actors() == []
        assert 100 <= len(seen) <= 120, len(seen)
        assert all(sum(1 for u in seen if t <= u < t + 60) <= 120 for t in seen)
        kept = len(list(read_records(out)))
        assert (out / "run.json").is_file()
        # The lock is released and the run goes on where it stopped.
        alone = spec.model_copy(update={"ray": None, "workers": None,
                                        "requests_per_minute": None})  # fmt: skip
        result = await run_evaluation(alone, resume=True)
    assert result.complete
    ids = [r.sample_id for r in read_records(out)]
    assert len(ids) == len(set(ids)) == 60
    assert kept < 60


async def test_a_refused_key_stops_the_run_with_the_one_line_a_single_process_says(
    data_dir: Path, tmp_path: Path
) -> None:
    fake = FakeOpenAI(lambda body: "True", api_key="another-key")
    with serving(fake.app()) as srv:
        with pytest.raises(FatalBackendError) as alone:
            await run_evaluation(_spec(tmp_path / "one", data_dir, srv.base_url))
        with pytest.raises(FatalBackendError) as spread:
            await run_evaluation(_spec(tmp_path / "ray", data_dir, srv.base_url, ray=""))
    assert str(spread.value) == str(alone.value)
    assert not (tmp_path / "ray" / "run.json").exists()
    assert _ray_actors() == []


async def test_limits_too_small_to_split_over_the_workers_are_refused(
    data_dir: Path, tmp_path: Path
) -> None:
    spec = _spec(tmp_path / "run", data_dir, "http://127.0.0.1:9/v1", ray="", workers=3,
                 tokens_per_minute=2)  # fmt: skip
    with pytest.raises(ConfigError, match=r"2 tokens per minute \(--tpm\) cannot be split over "
                       r"3 workers .* give --workers 2 or fewer"):  # fmt: skip
        await run_evaluation(spec)
    assert not (tmp_path / "run" / "run.json").exists()


@pytest.mark.parametrize(
    ("setting", "refusal"),
    [
        ({"batch": True}, "--batch does not run with --ray: a provider batch gathers the calls"),
        ({"budget_usd": 1.0}, "--budget-usd does not run with --ray: a budget is kept by the one"),
        ({"max_calls": 10}, "--max-calls does not run with --ray"),
        ({"dataset": "gsm8k", "strategies": ["zero_shot_cot", "dspy_bfrs"]},
         "dspy_bfrs runs with --ray only from a saved program: it makes one program a cell's"),
    ],
    ids=["batch", "budget", "max-calls", "dspy"],
)  # fmt: skip
async def test_what_workers_cannot_do_is_refused_before_anything_is_written(
    setting: dict[str, Any], refusal: str, data_dir: Path, tmp_path: Path
) -> None:
    spec = _spec(tmp_path / "run", data_dir, "http://127.0.0.1:9/v1", ray="", **setting)
    with pytest.raises(ConfigError, match=refusal):
        await run_evaluation(spec)
    assert not (tmp_path / "run").exists()


async def test_ray_missing_is_refused_with_the_extra_to_install(
    monkeypatch: pytest.MonkeyPatch, data_dir: Path, tmp_path: Path
) -> None:
    monkeypatch.setitem(sys.modules, "ray", None)  # import ray fails, as when not installed
    spec = _spec(tmp_path / "run", data_dir, "http://127.0.0.1:9/v1", ray="")
    with pytest.raises(ConfigError, match=RAY_HINT.replace("[", r"\[").replace("]", r"\]")):
        await run_evaluation(spec)
    assert not (tmp_path / "run").exists()


async def _laid_out(data_dir: Path, tmp_path: Path) -> tuple[list[Any], RayCampaign]:
    """A three-sample campaign's plans with every sample to do, laid out as the driver lays
    them out before any worker starts."""
    spec = _spec(tmp_path / "run", data_dir, "http://127.0.0.1:9/v1", ray="", limit=3)
    spec = spec.model_copy(update={"penalties": run_penalties(spec)})
    plans = await plan_cells(spec)
    for p in plans:
        p.todo = [(s, 0) for s in p.samples]
    campaign = RayCampaign(spec, plans, SilentObserver())
    campaign._lay_out()
    return plans, campaign


async def test_a_record_already_written_is_dropped(data_dir: Path, tmp_path: Path) -> None:
    """A climb run again after its worker died may land twice: written once."""
    plans, campaign = await _laid_out(data_dir, tmp_path)

    class Store:
        def __init__(self) -> None:
            self.written: list[SampleRecord] = []

        async def append(self, records: list[SampleRecord]) -> None:
            self.written += records

    handed: list[list[Any]] = []
    actor = SimpleNamespace(feed=SimpleNamespace(remote=handed.append))
    store, slot = Store(), _Slot(0, WorkerStats("worker 1"), actor=actor, ready=True)
    campaign._dispatch(slot)
    assert sum(map(len, handed)) == 3 and slot.stats.in_flight == 3
    first = plans[0].samples[0].id
    record = make_record(first, model=MODEL, level=1, penalty=plans[0].tally.penalty)
    text = record.model_dump_json()
    await campaign._land(slot, [parse_record_json(text)], store)
    await campaign._land(slot, [parse_record_json(text), parse_record_json(text)], store)
    assert [r.sample_id for r in store.written] == [first]
    assert campaign.duplicates == 2
    assert plans[0].tally.n == 1 and slot.stats.in_flight == 2


async def test_a_place_emptied_too_often_stops_the_run_naming_the_samples_in_flight(
    data_dir: Path, tmp_path: Path
) -> None:
    plans, campaign = await _laid_out(data_dir, tmp_path)
    actor = SimpleNamespace(feed=SimpleNamespace(remote=lambda items: None))
    slot = _Slot(0, WorkerStats("worker 1"), actor=actor, ready=True)
    slot.stats.restarts = ray_driver.MAX_RESTARTS
    campaign._dispatch(slot)
    ids = ", ".join(f"boolq {s.id}" for s in plans[0].samples)
    with pytest.raises(ray_driver.WorkersLost, match=f"worker 1 died 4 times \\(last: gone\\); "
                       f"the run stops; in flight: {ids}$"):  # fmt: skip
        await campaign._lost(slot, "gone", None)  # type: ignore[arg-type]


class Servers(SilentObserver):
    """The embedded servers' actors when the climbs start."""

    def __init__(self) -> None:
        self.names: list[str] = []

    def started(self, spec: RunSpec, total: int, out: Path, done: int = 0) -> None:
        self.names = [n for n in _ray_actors() if n.startswith("hpt-embedded-")]


@pytest.mark.embedded
async def test_the_embedded_model_runs_one_server_per_node_for_its_workers(
    data_dir: Path, tmp_path: Path
) -> None:
    observer = Servers()
    spec = RunSpec.model_validate(
        {"dataset": "boolq", "model": "local", "limit": 2, "concurrency": 1, "cache": False,
         "strategies": ["role"], "params": {"max_tokens": 32}, "data_dir": data_dir,
         "out": tmp_path / "run", "ray": "", "workers": 2}
    )  # fmt: skip
    result = await run_evaluation(spec, observer)
    assert result.complete and result.summary.samples == 2
    assert len(observer.names) == 1  # this machine is one node: one server, two workers
    assert _ray_actors() == []


@pytest.mark.embedded
async def test_a_nodes_embedded_server_dies_with_its_actor() -> None:
    server = ray.remote(NodeServer).options(num_cpus=0).remote(2)
    url = await server.url.remote()
    assert isinstance(url, str), url
    health = url.removesuffix("/v1") + "/health"
    async with httpx.AsyncClient(timeout=2) as client:
        assert (await client.get(health)).status_code == 200
        ray.kill(server, no_restart=True)  # as a lost node's actor: no clean-up of its own
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            try:
                await client.get(health)
            except httpx.TransportError:
                return  # nothing listens there any more
            await asyncio.sleep(0.2)
    pytest.fail(f"the embedded server at {url} outlived its actor")


def test_ctrl_c_stops_the_workers_and_leaves_a_resumable_run(
    data_dir: Path, tmp_path: Path
) -> None:
    """``hpt run --ray`` starting its own local Ray, interrupted as a terminal's Ctrl-C
    does: it says how to go on, keeps what landed, and a resume over Ray finishes it."""
    fake = FakeOpenAI(lambda body: "I am not sure.", delay_s=0.2)
    out = tmp_path / "run"
    samples = out / "samples.jsonl"
    with serving(fake.app()) as srv:
        cmd = run_cmd(srv.base_url, data_dir, out, 40, "--ray", "--workers", "2", "--no-cache")
        proc = subprocess.Popen(cmd, env=env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True, preexec_fn=interruptible)  # fmt: skip
        wait_until(lambda: samples.exists() and samples.read_text().count("\n") >= 3,
                   "three records", timeout=120)  # fmt: skip
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=120)
        assert proc.returncode == EXIT_INTERRUPTED, err
        assert err.strip().endswith(f"Continue with: hpt run --resume {out}"), err
        kept = len(list(read_records(out)))
        assert 3 <= kept < 40
        spec = load_saved_spec(out).run_spec()
        resumed = spec.restore_credentials([]).model_copy(update={"ray": "", "out": out})
        result = asyncio.run(run_evaluation(resumed, resume=True))
    assert result.complete
    ids = [r.sample_id for r in read_records(out)]
    assert len(ids) == len(set(ids)) == 40


def test_workers_load_the_runs_plugins(tmp_path: Path) -> None:
    """A plugin's dataset, provider and strategy, run over Ray workers that import it."""
    site = _write_plugin(tmp_path / "plug")
    out = tmp_path / "run"
    result = hpt("--plugin", "parityplug", "run", "--dataset", "parity", "--model", "echo:even",
                 "--strategies", "ask_again,role", "--strategy-arg", "ask_again.times=3",
                 "--out", str(out), "--no-cache", "--ray", "--workers", "2",
                 env={"PYTHONPATH": str(site)})  # fmt: skip
    assert result.returncode == 0, result.stderr
    _check_run(out, times=3)


async def test_a_depthqa_graphs_nodes_that_share_answers_run_in_one_worker(tmp_path: Path) -> None:
    """A node reuses its predecessors' answers (one call each in one process): spread over
    workers node by node, the shared calls were made again in each; a component of the graph
    goes to one worker, so the workers ask exactly what one process asks."""
    asked = []
    for name, spread in (("one", {}), ("ray", {"ray": "", "workers": 2})):
        scripted = Scripted()
        with serving(FakeOpenAI(scripted).app()) as srv:
            spec = RunSpec.model_validate(
                {"dataset": "depthqa", "model": MODEL, "concurrency": 1, "cache": False,
                 "task_args": {"depthqa": {"graph": str(write_graph(tmp_path / "graph")),
                                           "mode": ["prompt-pred", "multi-turn"]}},
                 "out": tmp_path / name, "base_url": srv.base_url, "retry": FAST_RETRY,
                 **spread}
            )  # fmt: skip
            result = await run_evaluation(spec)
        assert result.complete and sum(s.samples for s in result.summaries) == 12
        asked.append(sorted(scripted.answers))
    assert asked[1] == asked[0] and len(asked[0]) == len(set(asked[0])) == 12


def test_an_address_where_no_ray_answers_fails_within_the_timeout_with_one_line(
    data_dir: Path, tmp_path: Path
) -> None:
    """Ray retries such an address for many minutes, deaf to Ctrl-C: hpt gives up after
    ``CONNECT_S`` (here made 3 s) and says what to check."""
    patched = ("import sys; from hpt.orchestrator import ray_driver; ray_driver.CONNECT_S = 3; "
               "from hpt.cli import main; sys.exit(main())")  # fmt: skip
    cmd = run_cmd("http://127.0.0.1:9/v1", data_dir, tmp_path / "run", 2, "--ray", "127.0.0.1:1")
    started = time.monotonic()
    result = subprocess.run([sys.executable, "-c", patched, *cmd[1:]], env=env(),
                            capture_output=True, text=True, timeout=120)  # fmt: skip
    assert time.monotonic() - started < 60, "not given up on within its timeout"
    assert result.returncode == 2, result.stderr
    said = [line for line in result.stderr.splitlines() if line.startswith("hpt: error:")]
    assert said == [
        "hpt: error: cannot connect to Ray (--ray 127.0.0.1:1): no answer within 3 s; check that "
        "the cluster is up (ray status on its head node) and reachable from here, and that "
        "--ray ADDRESS or RAY_ADDRESS names its head node as HOST:PORT (or auto: the Ray "
        "started on this machine)"
    ], result.stderr
    assert not (tmp_path / "run").exists()


# A provider whose call for one sample (n3's) ends the process that makes it, as a sample
# that crashes its worker would.
DOOM = """
import os


class DoomConfig(EchoConfig):
    provider: Literal["doom"] = "doom"


class DoomTransport(EchoTransport):
    provider = "doom"

    async def send(self, messages, params):
        if "Is 3 " in messages[-1].content:
            os._exit(1)
        return await super().send(messages, params)


class Doom(Echo):
    name = "doom"
    config = DoomConfig

    def from_spec(self, rest):
        return DoomConfig(model=rest, says=rest)

    def make_transport(self, config):
        return DoomTransport(config)


register_provider(Doom(), replace=True)
"""


def test_a_sample_that_kills_its_worker_each_time_is_recorded_as_errored(tmp_path: Path) -> None:
    """After its worker died twice with it, the sample is recorded with the error (a
    resume tries it again) and the run goes on: the other samples are recorded once."""
    site = tmp_path / "plug"
    site.mkdir()
    (site / "doomplug.py").write_text(PLUGIN + DOOM)
    (site / "parity.toml").write_text(PROMPTS)
    out = tmp_path / "run"
    result = hpt("--plugin", "doomplug", "run", "--dataset", "parity", "--model", "doom:even",
                 "--strategies", "ask_again", "--out", str(out), "--no-cache", "--no-progress",
                 "--ray", "--workers", "2", "--concurrency", "1",
                 env={"PYTHONPATH": str(site)}, timeout=300)  # fmt: skip
    assert result.returncode == 0, result.stderr
    records = {r.sample_id: r for r in read_records(out)}
    assert sorted(records) == ["n0", "n1", "n2", "n3"]
    assert [r.error for r in records.values() if r.error] == [records["n3"].error]
    assert records["n3"].error.startswith("the worker climbing it died 2 times (last: "), records
    assert records["n3"].attempts == [] and records["n3"].hpi_score is None
