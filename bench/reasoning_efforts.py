"""Issue 26's second measurement: a three-effort campaign over a scripted reasoning model, and
what `hpt report` makes of it (HPI, accuracy, truncations, tokens and cost against effort).

    .venv/bin/python bench/reasoning_efforts.py [--limit 10] [--datasets gsm8k,boolq]
                                                [--max-tokens 1024] [--out DIR]

The model (tests/servers/openai_compat.py, vLLM-style: its thinking in the ``reasoning``
field, counted in ``reasoning_tokens``, cut at the token limit with finish_reason "length")
thinks as much as the effort it is sent asks, and always names a wrong answer first:

- low: a few words of thinking; its answer is right for one prompt in two;
- medium: about 300 words; right for three prompts in four;
- high: 600 to 1,400 words (by prompt); always right, but over ``--max-tokens`` it is cut off
  inside its thinking, before any answer.

A careful reader expects medium to beat low, and high to lose what it gains to the token
limit; the report must show both, and count the thinking tokens (billed as output) once.
Prices: 1 USD per million input tokens, 4 per million output tokens.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from hpt.orchestrator import RunSpec, run_evaluation  # noqa: E402
from hpt.tasks import Sample  # noqa: E402
from tests.backend_helpers import serving  # noqa: E402
from tests.servers.openai_compat import FakeOpenAI, Reply  # noqa: E402
from tests.test_reasoning_readers import ANSWERS, chosen, sample_of  # noqa: E402

EFFORTS = ("low", "medium", "high")
LADDER = ("role", "zero_shot_cot", "three_shot_cot")
# How often each effort's answer is right, out of 4 prompts; and how long it thinks.
RIGHT_OF_4 = {"low": 2, "medium": 3, "high": 4}
KEY = "bench-key"


def _hash(*parts: str) -> int:
    return int(hashlib.sha256("|".join(parts).encode()).hexdigest(), 16)


def _words(n: int) -> str:
    return " ".join(f"step{i % 97}" for i in range(n))


def reply(dataset: str, sample: Sample, prompt: str, effort: str | None) -> Reply:
    answers = ANSWERS[dataset](sample)
    right, wrong = answers.right, answers.wrong
    if effort is None:  # not the evaluated model's call: answer plainly
        return Reply(right)
    seed = _hash(sample.id, prompt, effort)
    length = {"low": 8, "medium": 300, "high": 600 + seed % 800}[effort]
    thinking = f"Maybe: {wrong}. {_words(length)} No, it is {right}."
    answer = right if seed % 4 < RIGHT_OF_4[effort] else wrong
    return Reply(answer, reasoning=thinking)


def campaign(datasets: list[str], data_dir: Path, limit: int, max_tokens: int, out: Path) -> None:
    chosen_samples = {d: chosen(d, data_dir, limit)[1] for d in datasets}

    def respond(body: dict[str, Any]) -> Reply:
        prompt = body["messages"][-1]["content"]
        for dataset, samples in chosen_samples.items():
            try:
                sample = sample_of(body, samples)
            except AssertionError:
                continue
            return reply(dataset, sample, prompt, body.get("reasoning_effort"))
        raise AssertionError(f"no sample in {prompt[:120]!r}")

    fake = FakeOpenAI(respond, api_key=KEY, model_ids=("thinker",))
    os.environ["BENCH_REASONING_KEY"] = KEY
    with serving(fake.app()) as server:
        spec = RunSpec.model_validate({
            "dataset": datasets, "model": "thinker", "strategies": list(LADDER),
            "models": {"thinker": {"provider": "openai", "model": "thinker",
                                   "endpoints": [server.base_url],
                                   "api_key_env": "BENCH_REASONING_KEY"}},
            "reasoning_effort": list(EFFORTS), "limit": limit, "data_dir": data_dir,
            "out": out, "cache": False, "params": {"max_tokens": max_tokens},
        })  # fmt: skip
        asyncio.run(run_evaluation(spec))
    print(f"{fake.served} calls answered by the scripted model")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--limit", type=int, default=10, help="samples per dataset (10)")
    parser.add_argument("--datasets", default="gsm8k,boolq")
    parser.add_argument("--max-tokens", type=int, default=1024)
    parser.add_argument("--data-dir", type=Path, default=REPO.parent / "shared" / "data")
    parser.add_argument("--out", type=Path, help="keep the run here (default: a temp dir)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        out = args.out or Path(tmp) / "run"
        campaign(args.datasets.split(","), args.data_dir, args.limit, args.max_tokens, out)
        prices = Path(tmp) / "prices.toml"
        prices.write_text('["thinker"]\ninput = 1.0\noutput = 4.0\n')
        report = subprocess.run(
            [str(Path(sys.executable).parent / "hpt"), "report", str(out), "--prices", str(prices),
             "--out", str(Path(tmp) / "report"), "--no-plots"],
            capture_output=True, text=True, check=True,
        )  # fmt: skip
        text = (Path(tmp) / "report" / "report.md").read_text()
        # The report's own section on efforts, as a user reads it.
        section = text[text.index("## Against reasoning effort") :]
        print(section[: section.find("\n## ", 3)].strip())
        print(report.stderr, end="")


if __name__ == "__main__":
    main()
