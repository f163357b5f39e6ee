"""Calls and tokens of optimisation vs evaluation for dspy_bfrs and dspy_mipro (auto=light).

GSM8K from offline data (``--data-dir``, default ../shared/data) against a local scripted
OpenAI-compatible server: it answers in DSPy's field format, correctly for about two thirds
of the questions (a fixed hash of the question), and writes proposals for MIPROv2's
instruction proposer. Token counts are the server's (words, not a real tokenizer). Each
strategy runs once with a fresh response cache; "cached" calls are repeats inside the run.

    .venv/bin/python bench/dspy_calls.py [--limit 20] [--strategies dspy_bfrs,dspy_mipro]
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import os
import re
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from hpt.orchestrator import RunSpec, run_evaluation  # noqa: E402
from hpt.tasks import get_task  # noqa: E402
from tests.servers.openai_compat import FakeOpenAI, ServerThread  # noqa: E402

PROGRAM_FIELDS = {"answer", "reasoning"}


class Scripted:
    def __init__(self, key: dict[str, str]) -> None:
        self.key = key

    def __call__(self, body: dict[str, Any]) -> str:
        messages = body["messages"]
        system = messages[0]["content"] if messages[0]["role"] == "system" else ""
        section = system.split("Your output fields are:", 1)[-1].split("All interactions", 1)[0]
        fields = re.findall(r"^\d+\. `(\w+)`", section, re.MULTILINE)
        last = messages[-1]["content"]
        if not set(fields) <= PROGRAM_FIELDS:
            return "".join(f"[[ ## {f} ## ]]\nSolve step by step; state the number.\n\n"
                           for f in fields) + "[[ ## completed ## ]]"  # fmt: skip
        question = last.split("[[ ## question ## ]]", 1)[-1].split("Respond with", 1)[0].strip()
        gold = self.key.get(question, "0")
        right = hashlib.sha256(question.encode()).digest()[0] % 3 != 0
        parts = {"reasoning": "Work it out step by step.", "answer": gold if right else "-1"}
        return "".join(f"[[ ## {f} ## ]]\n{parts[f]}\n\n" for f in fields or ["answer"]) + (
            "[[ ## completed ## ]]"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", type=Path, default=REPO.parent / "shared" / "data")
    parser.add_argument("--limit", type=int, default=20)
    parser.add_argument("--strategies", default="dspy_bfrs,dspy_mipro")
    args = parser.parse_args()
    os.environ.setdefault("OPENAI_API_KEY", "test-key")
    task = get_task("gsm8k", args.data_dir)
    key = {str(s.fields["question"]).strip(): s.target
           for s in [*task.load_samples(), *task.load_train_pool()]}  # fmt: skip
    fake = FakeOpenAI(responder=Scripted(key), record_requests=False)
    server = ServerThread(fake.app()).start()
    results: dict[str, Any] = {}
    try:
        for name in args.strategies.split(","):
            with tempfile.TemporaryDirectory() as tmp:
                os.environ["HPT_CACHE_DIR"] = str(Path(tmp) / "cache")
                out = Path(tmp) / "run"
                spec = RunSpec.model_validate({
                    "dataset": "gsm8k", "model": "openai:test-model",
                    "base_url": server.base_url, "data_dir": args.data_dir,
                    "strategies": [name], "limit": args.limit, "out": out,
                    "params": {"temperature": 0.0},
                })  # fmt: skip
                started = time.perf_counter()
                asyncio.run(run_evaluation(spec))
                usage = json.loads((out / "programs" / "usage.json").read_text())
                (cell,) = usage.values()
                meta_file = next((out / "programs").glob("*.meta.json"))
                meta = json.loads(meta_file.read_text())
                results[name] = {
                    **cell,
                    "train": meta["train_size"],
                    "val": meta["val_size"],
                    "wall_s": round(time.perf_counter() - started, 1),
                }
    finally:
        server.stop()
    print(f"gsm8k, {args.limit} test samples, scripted backend (tokens = server word counts)")
    for name, r in results.items():
        print(f"{name}: train {r['train']} / val {r['val']}, {r['wall_s']} s")
        for phase in ("optimisation", "evaluation"):
            u = r[phase]
            tokens = u["prompt_tokens"] + u["completion_tokens"]
            print(f"  {phase:13} {u['calls']:6} calls ({u['cached_calls']} cached)  "
                  f"{tokens:9} tokens ({u['prompt_tokens']} prompt + "
                  f"{u['completion_tokens']} completion)")  # fmt: skip


if __name__ == "__main__":
    main()
