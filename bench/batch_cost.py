"""Issue 27's measurement: what a GSM8K ladder costs on hosted APIs, directly and through their
Batch APIs, with and without provider prompt caching, and how well ``--estimate`` predicts it.

    .venv/bin/python bench/batch_cost.py [--limit 200] [--estimate 20] [--contrast 40]
                                         [--out DIR]

The models are the test servers (tests/servers): FakeOpenAI serving ``gpt-5-mini`` and
FakeAnthropic serving ``claude-sonnet-4-5``, each speaking its provider's protocol, Batch API
and prompt-cache accounting (OpenAI's automatic prefix caching; Anthropic's ``cache_control``
breakpoints, each at the model's documented minimum). Their prices are litellm's cost-map
entries for those models, given as ``--prices`` because the servers are on loopback (hpt
prices a hosted model's label only at the provider's own host).

A scripted model resolves each sample from a level fixed by the sample (35% at role
prompting, 20% zero-shot CoT, 15% three-shot CoT, 10% least-to-most, 10% generated knowledge,
10% never), so the ladder's depth varies as a real model's does.

``--contrast N`` adds MedCalc-Bench runs of N samples of its first three calculators (MedCalc
has ~20 test rows per calculator, so this is the density of a full run): its three-shot
exemplars (~6,000 tokens, shared by every sample of a calculator) clear every provider's
caching minimum, where GSM8K's (~300 tokens) clear none.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import csv
import hashlib
import os
import re
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from hpt.graphs import DEFAULT_LADDER  # noqa: E402
from hpt.orchestrator import RunSpec, run_evaluation  # noqa: E402
from hpt.results.costs import ModelPrice, PriceBook, call_cost  # noqa: E402
from hpt.results.reader import read_records  # noqa: E402
from hpt.tasks import Sample, task_class  # noqa: E402
from tests.backend_helpers import serving  # noqa: E402
from tests.servers.answer_key import strategy_of  # noqa: E402
from tests.servers.anthropic_api import FakeAnthropic  # noqa: E402
from tests.servers.batches import BatchTiming  # noqa: E402
from tests.servers.openai_compat import FakeOpenAI  # noqa: E402

OPENAI_MODEL = "gpt-5-mini"
ANTHROPIC_MODEL = "claude-sonnet-4-5"
# The level each sample resolves from, by share of samples (the rest never resolve).
RESOLVE_FROM = (("role", 35), ("zero_shot_cot", 20), ("three_shot_cot", 15),
                ("least_to_most", 10), ("generated_knowledge", 10))  # fmt: skip
# The same words every reply reasons with: about 60 words of output per answer.
REASONING = " ".join(f"Step {i}: work out part {i} of the problem carefully." for i in range(6))
BATCH_FLAGS = {"batch": True, "batch_wait_s": 1.0, "batch_poll_s": 0.5}


def _hash(*parts: str) -> int:
    return int(hashlib.sha256("|".join(parts).encode()).hexdigest(), 16)


def resolves_from(sample_id: str) -> str | None:
    roll = _hash(sample_id) % 100
    for level, share in RESOLVE_FROM:
        if roll < share:
            return level
        roll -= share
    return None


def _flat(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip()


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    return "".join(b.get("text", "") for b in content if b.get("type") == "text")


def plain_body(body: dict[str, Any]) -> dict[str, Any]:
    """An Anthropic body as the OpenAI-shaped one ``strategy_of`` reads (text turns)."""
    return {"messages": [{"role": m["role"], "content": _text(m["content"])}
                         for m in body["messages"]]}  # fmt: skip


def responder(samples: Sequence[Sample], question: Callable[[Sample], str]) -> Any:
    """The scripted model: answers right from the sample's level on, else unsure."""
    by_text = {_flat(question(s))[:200]: s for s in samples}

    def respond(body: dict[str, Any]) -> str:
        body = plain_body(body)
        everything = _flat(" ".join(m["content"] for m in body["messages"]))
        kind = strategy_of(body)
        if kind == "knowledge":
            return f"Background: {REASONING}"
        # Least-to-most's earlier steps answer as its last does: only the last is read.
        found = [s for text, s in by_text.items() if text in everything]
        sample = found[-1] if found else None
        first = resolves_from(sample.id) if sample else None
        if (
            sample is None
            or first is None
            or DEFAULT_LADDER.index(kind) < DEFAULT_LADDER.index(first)
        ):
            return f"{REASONING} I am not sure of the final answer."
        return f"{REASONING} The answer is {sample.target}."

    return respond


@dataclass
class Measured:
    name: str
    wall_s: float
    usd: float
    calls: int
    batched_calls: int
    prompt_tokens: int
    cached_tokens: int
    written_tokens: int
    hpi: float | None
    # level -> (prompt tokens, cache-read tokens)
    by_level: dict[int, tuple[int, int]]


def measure(name: str, out: Path, wall_s: float, prices: dict[str, ModelPrice]) -> Measured:
    usd, calls, batched, prompt, read, written = 0.0, 0, 0, 0, 0, 0
    hpis: list[float] = []
    levels: dict[int, list[int]] = defaultdict(lambda: [0, 0])
    for record in read_records(out):
        if record.hpi_score is not None:
            hpis.append(record.hpi_score)
        for attempt in record.attempts:
            for call in attempt.calls:
                if call.cached:
                    continue
                u = call.usage
                usd += call_cost(u, call.batched, prices[call.model])
                calls += 1
                batched += call.batched
                prompt += u.prompt_tokens
                read += u.cache_read_tokens or 0
                written += u.cache_write_tokens or 0
                levels[attempt.level][0] += u.prompt_tokens
                levels[attempt.level][1] += u.cache_read_tokens or 0
    return Measured(name, wall_s, usd, calls, batched, prompt, read, written,
                    sum(hpis) / len(hpis) if hpis else None,
                    {k: (v[0], v[1]) for k, v in sorted(levels.items())})  # fmt: skip


def prices_file(directory: Path) -> tuple[Path, dict[str, ModelPrice]]:
    """The cost map's entries for the two models, as a --prices file keyed by model id (the
    runs' labels below are the model ids)."""
    book = PriceBook.load()
    found: dict[str, ModelPrice] = {}
    lines = []
    for provider, model in (("openai", OPENAI_MODEL), ("anthropic", ANTHROPIC_MODEL)):
        price = book.price(f"{provider}:{model}", provider, model)
        if price is None:
            raise SystemExit(f"no price for {model} in litellm's cost map: install hpt[prices]")
        found[model] = price
        lines.append(f'["{model}"]')
        for key, value in price.model_dump(exclude={"source"}).items():
            if value is not None:
                lines.append(f"{key} = {value}")
    path = directory / "prices.toml"
    path.write_text("\n".join(lines) + "\n")
    return path, found


@dataclass(frozen=True)
class Setting:
    name: str
    provider: str  # "openai" | "anthropic"
    flags: dict[str, Any]


SETTINGS = (
    Setting("OpenAI, direct (automatic prefix caching)", "openai", {}),
    Setting("OpenAI, --batch", "openai", BATCH_FLAGS),
    Setting("Anthropic, --prompt-cache off", "anthropic", {"prompt_cache": "off"}),
    Setting("Anthropic, --prompt-cache auto", "anthropic", {}),
    Setting("Anthropic, --batch --prompt-cache auto", "anthropic", BATCH_FLAGS),
)
# A hosted API's latency, and how long a test batch takes to go through.
LATENCY_S = 0.5
CONCURRENCY = 32


@contextlib.contextmanager
def server(provider: str, respond: Any) -> Iterator[dict[str, Any]]:
    """A fresh server (an empty prompt cache) and the model entry that reaches it."""
    timing = BatchTiming(validating_s=0.2, in_progress_s=2.0, finalizing_s=0.2)
    if provider == "openai":
        fake: Any = FakeOpenAI(respond, model_ids=(OPENAI_MODEL,), delay_s=LATENCY_S,
                               batch_timing=timing, record_requests=False)  # fmt: skip
        with serving(fake.app()) as s:
            os.environ["OPENAI_API_KEY"] = fake.api_key
            yield {"provider": "openai", "model": OPENAI_MODEL, "endpoints": [s.base_url]}
    else:
        fake = FakeAnthropic(respond, model_ids=(ANTHROPIC_MODEL,), delay_s=LATENCY_S,
                             batch_timing=timing)  # fmt: skip
        with serving(fake.app()) as s:
            os.environ["ANTHROPIC_API_KEY"] = fake.api_key
            yield {"provider": "anthropic", "model": ANTHROPIC_MODEL, "endpoints": [s.root_url]}


def run_one(
    dataset: str, model: dict[str, Any], out: Path, limit: int, prices: Path, data: Path,
    estimate: int | None = None, **flags: Any,
) -> tuple[float, Any]:  # fmt: skip
    name = model["model"]
    spec = RunSpec.model_validate({
        "dataset": dataset, "model": name, "models": {name: model}, "data_dir": data,
        "out": out, "limit": limit, "cache": False, "concurrency": CONCURRENCY,
        "prices_file": prices, **flags,
    })  # fmt: skip
    started = time.perf_counter()
    result = asyncio.run(run_evaluation(spec, estimate=estimate))
    return time.perf_counter() - started, result


def report(rows: list[Measured], title: str) -> None:
    print(f"\n### {title}\n")
    print("| setting | wall s | calls (batched) | USD | cached share of input | "
          "cache writes | HPI |")  # fmt: skip
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        share = r.cached_tokens / r.prompt_tokens if r.prompt_tokens else 0.0
        hpi = "-" if r.hpi is None else f"{r.hpi:.3f}"
        print(f"| {r.name} | {r.wall_s:.1f} | {r.calls} ({r.batched_calls}) | {r.usd:.5f} | "
              f"{share:.1%} | {r.written_tokens} | {hpi} |")  # fmt: skip
    print("\ncached share of input tokens per level (calls made):\n")
    levels = sorted({k for r in rows for k in r.by_level})
    print("| setting | " + " | ".join(f"level {k}" for k in levels) + " |")
    print("|---|" + "---|" * len(levels))
    for r in rows:
        cells = []
        for k in levels:
            prompt, read = r.by_level.get(k, (0, 0))
            cells.append(f"{read / prompt:.1%}" if prompt else "-")
        print(f"| {r.name} | " + " | ".join(cells) + " |")


def campaign(dataset: str, key: Callable[[Sample], str], limit: int, data: Path, work: Path,
             estimate: int | None) -> None:  # fmt: skip
    task = task_class(dataset)(data)
    samples = task.choose(task.load_samples(), limit, 0)
    respond = responder(samples, key)
    prices_path, prices = prices_file(work)
    rows = []
    for i, setting in enumerate(SETTINGS):
        out = work / f"{dataset}-{i}"
        with server(setting.provider, respond) as model:
            wall, _ = run_one(dataset, model, out, limit, prices_path, data, **setting.flags)
        rows.append(measure(setting.name, out, wall, prices))
    report(rows, f"{dataset}, {limit} samples, the default five-level ladder")
    if estimate:
        out = work / f"{dataset}-estimate"
        with server("openai", respond) as model:
            _, result = run_one(dataset, model, out, limit, prices_path, data, estimate=estimate)
        e, actual = result.estimate, rows[0].usd
        inside = e.low_usd <= actual <= e.high_usd
        print(f"\nestimate from {estimate} samples (OpenAI, direct): {e.projected_usd:.5f} USD "
              f"[{e.low_usd:.5f}, {e.high_usd:.5f}]; the whole run cost {actual:.5f} USD "
              f"({'inside' if inside else 'OUTSIDE'} the interval; "
              f"{(e.projected_usd - actual) / actual:+.1%} off)")  # fmt: skip


def three_calculators(data: Path, work: Path) -> Path:
    """A data directory whose MedCalc test rows are those of its first three calculators."""
    source = data / "medcalc" / "test_data.csv"
    with source.open(newline="") as fh:
        rows = list(csv.DictReader(fh))
    kept = sorted({r["Calculator ID"] for r in rows}, key=int)[:3]
    out = work / "medcalc-three" / "medcalc" / "test_data.csv"
    out.parent.mkdir(parents=True, exist_ok=True)
    with out.open("w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(r for r in rows if r["Calculator ID"] in kept)
    return work / "medcalc-three"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--limit", type=int, default=200)
    parser.add_argument("--estimate", type=int, default=20)
    parser.add_argument("--contrast", type=int, default=60, help="MedCalc samples (0: none)")
    parser.add_argument("--data", type=Path, default=REPO.parent / "shared" / "data")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        work = args.out or Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        print(
            f"latency {LATENCY_S} s per direct call, {CONCURRENCY} samples in flight; test "
            "batches take ~2.4 s (--batch-wait 1, --batch-poll 0.5); real ones up to 24 h"
        )
        campaign("gsm8k", lambda s: str(s.fields["question"]), args.limit, args.data, work,
                 args.estimate)  # fmt: skip
        if args.contrast:
            campaign("medcalc", lambda s: str(s.fields["patient_note"]), args.contrast,
                     three_calculators(args.data, work), work, None)  # fmt: skip


if __name__ == "__main__":
    main()
