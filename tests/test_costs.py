"""Prices by token class (litellm's cost map read offline, the user's file over it) and what
calls cost: by class, at batch rates, and in reports per cell, level and resolved sample."""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from pathlib import Path

import pytest

from hpt.reports import api, cells_csv
from hpt.reports.cells import collect
from hpt.reports.cells_csv import CSV_COLUMNS
from hpt.reports.report_markdown import markdown
from hpt.results import Call, SampleRecord, Selection
from hpt.results.costs import (
    INSTALL_HINT,
    SELF_HOSTED_SOURCE,
    ModelPrice,
    PriceBook,
    PriceError,
    call_cost,
    litellm_cost_map,
    worst_cost,
)
from hpt.tasks import TASKS
from hpt.types import Usage
from tests.run_fixtures import make_record, write_run

# A cost map as litellm ships it (USD per token), with what the lookups must tell apart.
COST_MAP = {
    "sample_spec": {"litellm_provider": "one of https://docs.litellm.ai/docs/providers"},
    "gpt-4o": {"litellm_provider": "openai", "mode": "chat", "input_cost_per_token": 2.5e-06,
               "output_cost_per_token": 1e-05, "cache_read_input_token_cost": 1.25e-06,
               "input_cost_per_token_batches": 1.25e-06, "output_cost_per_token_batches": 5e-06},
    "gpt-4o-2024-08-06": {"litellm_provider": "openai", "input_cost_per_token": 2.5e-06,
                          "output_cost_per_token": 1e-05},
    "gpt-5": {"litellm_provider": "openai", "input_cost_per_token": 1.25e-06,
              "output_cost_per_token": 1e-05, "cache_read_input_token_cost": 1.25e-07},
    "gpt-5.4-mini": {"litellm_provider": "openai", "input_cost_per_token": 7.5e-07,
                     "output_cost_per_token": 4.5e-06, "cache_read_input_token_cost": 7.5e-08,
                     "cache_read_input_token_cost_batches": 3.8e-08,
                     "input_cost_per_token_batches": 3.75e-07,
                     "output_cost_per_token_batches": 2.25e-06},
    "o3": {"litellm_provider": "openai", "input_cost_per_token": 2e-06,
           "output_cost_per_token": 8e-06},
    "claude-sonnet-4-5": {"litellm_provider": "anthropic", "input_cost_per_token": 3e-06,
                          "output_cost_per_token": 1.5e-05, "cache_read_input_token_cost": 3e-07,
                          "cache_creation_input_token_cost": 3.75e-06},
    "claude-opus-4-20250514": {"litellm_provider": "anthropic", "input_cost_per_token": 1.5e-05,
                               "output_cost_per_token": 7.5e-05},
    "claude-opus-4-1-20250805": {"litellm_provider": "anthropic", "input_cost_per_token": 1.5e-05,
                                 "output_cost_per_token": 7.5e-05},
    # Another provider's entry under an OpenAI-looking name is not OpenAI's price.
    "azure/gpt-4o": {"litellm_provider": "azure", "input_cost_per_token": 9e-06,
                     "output_cost_per_token": 9e-06},
    "mistral-large": {"litellm_provider": "mistral", "input_cost_per_token": 2e-06,
                      "output_cost_per_token": 6e-06},
}  # fmt: skip


@pytest.fixture
def cost_map(tmp_path: Path) -> Path:
    path = tmp_path / "model_prices.json"
    path.write_text(json.dumps(COST_MAP))
    return path


@pytest.fixture
def book(cost_map: Path) -> PriceBook:
    return PriceBook.load(cost_map=cost_map)


def test_map_keys_resolve_by_provider_and_model(book: PriceBook) -> None:
    gpt = book.price("openai:gpt-4o", "openai", "gpt-4o")
    assert gpt is not None and (gpt.input, gpt.output, gpt.cache_read) == (2.5, 10.0, 1.25)
    assert (gpt.batch_input, gpt.batch_output) == (1.25, 5.0)  # the map's own batch rates
    assert "cost map: gpt-4o" in gpt.source and "cache writes billed as input" in gpt.source
    # "openai/..." as litellm writes ids is the same model.
    assert book.price("openai:openai/gpt-4o", "openai", "openai/gpt-4o") == gpt
    # Only the provider's own entries count: mistral-large is not an OpenAI model.
    assert book.price("openai:mistral-large", "openai", "mistral-large") is None
    assert book.price("anthropic:gpt-4o", "anthropic", "gpt-4o") is None


def test_dated_ids_resolve(book: PriceBook) -> None:
    # A snapshot the map lists is its own entry ...
    dated = book.price("openai:gpt-4o-2024-08-06", "openai", "gpt-4o-2024-08-06")
    assert dated is not None and dated.source.endswith("cost map: gpt-4o-2024-08-06"
                                                      "; batch at half the standard rates"
                                                      "; cache reads and cache writes billed as input")  # fmt: skip
    # ... one it does not, the undated model's; an undated id, its newest snapshot.
    sonnet = book.price("anthropic:x", "anthropic", "claude-sonnet-4-5-20250929")
    assert sonnet is not None and "cost map: claude-sonnet-4-5;" in sonnet.source
    later = book.price("openai:gpt-4o-2025-01-01", "openai", "gpt-4o-2025-01-01")
    assert later is not None and later.input == 2.5 and "cost map: gpt-4o;" in later.source
    opus = book.price("anthropic:claude-opus-4", "anthropic", "claude-opus-4")
    assert opus is not None and "cost map: claude-opus-4-20250514;" in opus.source
    assert book.price("anthropic:claude-opus-9", "anthropic", "claude-opus-9") is None


def test_batch_rates_fall_back_to_half(book: PriceBook) -> None:
    o3 = book.price("openai:o3", "openai", "o3")
    assert o3 is not None and (o3.batch_input, o3.batch_output) == (1.0, 4.0)
    assert "batch at half the standard rates" in o3.source
    # Anthropic: the map has no batch keys; batch discounts stack with cache prices.
    sonnet = book.price("anthropic:claude-sonnet-4-5", "anthropic", "claude-sonnet-4-5")
    assert sonnet is not None
    assert (sonnet.cache_read, sonnet.cache_write) == (0.3, 3.75)
    assert sonnet.rates(batched=True) == (1.5, 0.15, 1.875, 7.5)
    assert sonnet.rates(batched=False) == (3.0, 0.3, 3.75, 15.0)


def test_openai_cache_discount_in_batch_only_from_gpt5(book: PriceBook) -> None:
    # Before GPT-5, OpenAI's Batch API gives cached input no discount: the batch input rate.
    gpt4o = book.price("openai:gpt-4o", "openai", "gpt-4o")
    assert gpt4o is not None and gpt4o.rates(batched=True)[:2] == (1.25, 1.25)
    assert "no cache discount in batch before GPT-5" in gpt4o.source
    # GPT-5: half the cache-read rate; where the map gives a batch cache rate, that one.
    gpt5 = book.price("openai:gpt-5", "openai", "gpt-5")
    assert gpt5 is not None and gpt5.rates(batched=True)[:2] == (0.625, 0.0625)
    mini = book.price("openai:gpt-5.4-mini", "openai", "gpt-5.4-mini")
    assert mini is not None and mini.rates(batched=True)[1] == pytest.approx(0.038)


def test_user_file_overrides_the_map_by_label_or_model_id(tmp_path: Path, cost_map: Path) -> None:
    prices = tmp_path / "prices.toml"
    prices.write_text(
        '["openai:gpt-4o"]\ninput = 1.0\noutput = 2.0\ncache_read = 0.5\n'
        '["claude-sonnet-4-5"]\ninput = 4.0\noutput = 8.0\ncache_read = 0.4\ncache_write = 5.0\n'
        "batch_input = 1.0\nbatch_output = 3.0\nbatch_cache_read = 0.1\nbatch_cache_write = 2.0\n"
    )
    book = PriceBook.load(prices, cost_map=cost_map)
    gpt = book.price("openai:gpt-4o", "openai", "gpt-4o")
    assert gpt == ModelPrice(input=1.0, output=2.0, cache_read=0.5, batch_cache_read=0.5,
                             source="prices.toml; cache writes billed as input; no cache "
                             "discount in batch before GPT-5")  # fmt: skip
    # Batch rates not given: half of each standard rate, the cache write billed as input, and
    # (OpenAI before GPT-5, as the map's entries) cache reads at the batch input rate.
    assert gpt.rates(batched=True) == (0.5, 0.5, 0.5, 1.0)
    sonnet = book.price("anthropic:claude-sonnet-4-5", "anthropic", "claude-sonnet-4-5")
    assert sonnet is not None and sonnet.source == "prices.toml"
    assert sonnet.rates(batched=True) == (1.0, 0.1, 2.0, 3.0)
    # A model the file leaves out still comes from the map.
    gpt5 = book.price("openai:gpt-5", "openai", "gpt-5")
    assert gpt5 is not None and "cost map" in gpt5.source


def test_user_file_batch_cache_reads_follow_openais_rule(tmp_path: Path, cost_map: Path) -> None:
    prices = tmp_path / "prices.toml"
    prices.write_text(
        '["gpt-4o-mini"]\ninput = 1.0\noutput = 2.0\ncache_read = 0.5\nbatch_input = 0.4\n'
        '["gpt-4.1"]\ninput = 1.0\noutput = 2.0\ncache_read = 0.5\nbatch_cache_read = 0.2\n'
        '["gpt-5-mini"]\ninput = 1.0\noutput = 2.0\ncache_read = 0.5\n'
        '["my-llama"]\ninput = 1.0\noutput = 2.0\ncache_read = 0.5\n'
    )
    book = PriceBook.load(prices, cost_map=cost_map)
    usage = Usage(prompt_tokens=1000, cache_read_tokens=1000)
    # Before GPT-5: batched cache reads at the file's batch input rate.
    mini = book.price("openai:gpt-4o-mini", "openai", "gpt-4o-mini")
    assert mini is not None and mini.rates(batched=True)[:2] == (0.4, 0.4)
    assert call_cost(usage, True, mini) == pytest.approx(0.0004)
    # A batch cache-read rate the file gives stands.
    gpt41 = book.price("openai:gpt-4.1", "openai", "gpt-4.1")
    assert gpt41 is not None and gpt41.rates(batched=True)[1] == 0.2
    # GPT-5 and later: the discounts stack (half the cache-read rate).
    gpt5 = book.price("openai:gpt-5-mini", "openai", "gpt-5-mini")
    assert gpt5 is not None and gpt5.rates(batched=True)[1] == 0.25
    # Not OpenAI's rule where OpenAI is not the provider.
    llama = book.price("local:my-llama", "vllm", "my-llama")
    assert llama is not None and llama.rates(batched=True)[1] == 0.25


def test_user_file_over_recorded_over_map(tmp_path: Path, cost_map: Path) -> None:
    recorded = {"openai:gpt-4o": ModelPrice(input=7.0, output=7.0, source="run.json")}
    book = PriceBook.load(cost_map=cost_map)
    assert book.price("openai:gpt-4o", "openai", "gpt-4o", recorded=recorded).input == 7.0
    prices = tmp_path / "p.toml"
    prices.write_text('["gpt-4o"]\ninput = 3.0\noutput = 3.0\n')
    mine = PriceBook.load(prices, cost_map=cost_map)
    assert mine.price("openai:gpt-4o", "openai", "gpt-4o", recorded=recorded).input == 3.0


def test_without_litellm_only_the_users_file(tmp_path: Path) -> None:
    prices = tmp_path / "prices.toml"
    prices.write_text('["openai:gpt-4o"]\ninput = 2.5\noutput = 10\n')
    book = PriceBook.load(prices, cost_map=tmp_path / "not-installed.json")
    assert book.price("openai:gpt-4o", "openai", "gpt-4o") is not None
    assert book.price("openai:gpt-5", "openai", "gpt-5") is None
    assert (
        book.unknown("openai:gpt-5", "openai", "gpt-5")
        == f"no price for openai:gpt-5: {INSTALL_HINT}"
    )


def test_self_hosted_is_free_and_foreign_endpoints_unknown(book: PriceBook) -> None:
    for label, provider in (("local", "local"), ("tgi:http://10.0.0.5:8080", "tgi")):
        price = book.price(label, provider, "")
        assert price is not None and price.source == SELF_HOSTED_SOURCE and price.free
        assert call_cost(Usage(prompt_tokens=10**6, completion_tokens=10**6), False, price) == 0.0
    # The OpenAI protocol served by a vLLM or llama.cpp server: not OpenAI's price, even for
    # a model the map knows by that name; OpenAI's own host (or a subdomain) is.
    served = ("openai:gpt-4o", "openai", "gpt-4o")
    assert book.price(*served, endpoint="http://user:pw@127.0.0.1:8000/v1") is None
    why = book.unknown(*served, endpoint="http://user:pw@127.0.0.1:8000/v1")
    assert why.startswith("openai:gpt-4o is served by 127.0.0.1:8000, not by openai: give it in "
                          '--prices FILE (["openai:gpt-4o"] input = USD') and "pw" not in why  # fmt: skip
    assert book.price(*served, endpoint="https://api.openai.com/v1") is not None
    assert book.price(*served, endpoint="https://evil-openai.com/v1") is None
    # Hugging Face's inference providers bill by their own prices: unknown until given.
    assert book.price("hf:meta-llama/Llama-3.1-8B", "hf", "meta-llama/Llama-3.1-8B") is None
    assert "Hugging Face" in book.unknown("hf:m", "hf", "m")


def test_call_cost_by_class_openai_shaped(book: PriceBook) -> None:
    """OpenAI counts cached tokens inside prompt_tokens and reasoning inside completion."""
    price = book.price("openai:gpt-5", "openai", "gpt-5")
    assert price is not None
    usage = Usage(prompt_tokens=3000, cache_read_tokens=2048, completion_tokens=500,
                  reasoning_tokens=300)  # fmt: skip
    # 952 fresh at 1.25, 2048 read at 0.125, 500 out (reasoning inside) at 10 per million.
    assert call_cost(usage, False, price) == pytest.approx((952 * 1.25 + 2048 * 0.125 + 5000) / 1e6)
    assert call_cost(usage, True, price) == pytest.approx(
        (952 * 0.625 + 2048 * 0.0625 + 2500) / 1e6
    )
    assert call_cost(Usage(prompt_tokens=1000, completion_tokens=100), False, price) == (
        pytest.approx((1250 + 1000) / 1e6)
    )


def test_call_cost_by_class_anthropic_shaped(book: PriceBook) -> None:
    """Anthropic's transport adds cache reads and writes into prompt_tokens."""
    price = book.price("anthropic:claude-sonnet-4-5", "anthropic", "claude-sonnet-4-5")
    assert price is not None
    usage = Usage(prompt_tokens=50 + 1200 + 1500, cache_read_tokens=1200, cache_write_tokens=1500,
                  completion_tokens=200)  # fmt: skip
    standard = 50 * 3 + 1200 * 0.3 + 1500 * 3.75 + 200 * 15
    assert call_cost(usage, False, price) == pytest.approx(standard / 1e6)
    assert call_cost(usage, True, price) == pytest.approx(standard / 2 / 1e6)


def test_worst_cost(book: PriceBook) -> None:
    sonnet = book.price("anthropic:claude-sonnet-4-5", "anthropic", "claude-sonnet-4-5")
    gpt = book.price("openai:gpt-4o", "openai", "gpt-4o")
    assert sonnet is not None and gpt is not None
    # A prompt may be written to Anthropic's cache: at the write rate, dearer than input.
    assert worst_cost(sonnet, 1000, 100, False) == pytest.approx((1000 * 3.75 + 100 * 15) / 1e6)
    assert worst_cost(sonnet, 1000, 100, True) == pytest.approx((1000 * 1.875 + 100 * 7.5) / 1e6)
    assert worst_cost(gpt, 1000, 100, False) == pytest.approx((1000 * 2.5 + 100 * 10) / 1e6)
    usage = Usage(prompt_tokens=1000, cache_write_tokens=1000, completion_tokens=100)
    assert call_cost(usage, False, sonnet) <= worst_cost(sonnet, 1000, 100, False)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('["m"]\ninput = -1\noutput = 1\n', "m.input: Input should be greater than or equal to 0"),
        ('["m"]\ninput = 1\noutput = 1\ncache_reed = 1\n', "m.cache_reed: Extra inputs"),
        ('["m"]\ninput = 1\n', "m.output: Field required"),
        ('["m"]\ninput = 1\noutput = 1\nbatch_input = nan\n', "m.batch_input"),
        ("[m\n", "not valid TOML"),
    ],
)
def test_bad_user_files_are_one_error(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "prices.toml"
    path.write_text(text)
    with pytest.raises(PriceError, match=r"prices\.toml") as caught:
        PriceBook.load(path)
    assert message in str(caught.value) and "\n" not in str(caught.value)


def test_a_corrupt_cost_map_is_one_error(tmp_path: Path) -> None:
    broken = tmp_path / "map.json"
    broken.write_text("{not json")
    book = PriceBook.load(cost_map=broken)
    with pytest.raises(PriceError, match=r"cannot read litellm's cost map .*map\.json"):
        book.price("openai:gpt-4o", "openai", "gpt-4o")


@pytest.mark.skipif(litellm_cost_map() is None, reason="litellm (hpt[prices]) not installed")
def test_the_installed_map_is_read_without_importing_litellm() -> None:
    book = PriceBook.load()
    gpt = book.price("openai:gpt-4o", "openai", "gpt-4o")
    sonnet = book.price("anthropic:claude-sonnet-4-5", "anthropic", "claude-sonnet-4-5")
    assert gpt is not None and sonnet is not None
    assert gpt.input > 0 and gpt.output > gpt.input and gpt.batch_input == gpt.input / 2
    assert sonnet.cache_read is not None and sonnet.cache_read < sonnet.input
    assert sonnet.source.startswith(f"litellm {book.version} cost map: claude-sonnet-4-5")
    # In a fresh interpreter: other tests here may have imported litellm (through DSPy).
    probe = (
        "import sys; from hpt.results.costs import PriceBook; "
        "assert PriceBook.load().price('openai:gpt-4o', 'openai', 'gpt-4o') is not None; "
        "assert 'litellm' not in sys.modules, 'litellm was imported'"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


# Reports: a hand-built run whose every cost is computed here.
GPT, CLAUDE = "openai:gpt-4o", "anthropic:claude-sonnet-4-5"
# What the run recorded for GPT (run.json ``prices``); CLAUDE comes from the cost map.
RECORDED = {GPT: {"input": 2.0, "output": 8.0, "cache_read": 1.0, "source": "run"}}


def _usage(record: SampleRecord, level: int, **usage: int) -> Call:
    call = record.attempts[level - 1].calls[0]
    call.usage = Usage(**usage)
    return call


def costed_run(directory: Path, spec: dict[str, object] | None = None) -> Path:
    """Three GSM8K-free BoolQ climbs of GPT (a batched call with cache reads; a level hpt's
    cache answered; an unresolved climb with a Claude judge writing Anthropic's cache) and an
    adaptive climb with a selector turn."""
    s1 = make_record("s1", model=GPT, level=1)
    _usage(s1, 1, prompt_tokens=1000, cache_read_tokens=800, completion_tokens=100).batched = True
    s2 = make_record("s2", model=GPT, level=2)
    _usage(s2, 1, prompt_tokens=1000, cache_read_tokens=0, completion_tokens=100)
    _usage(s2, 2, prompt_tokens=2000, completion_tokens=200).cached = True
    s3 = make_record("s3", model=GPT, level=None)
    for level in range(1, 6):
        _usage(s3, level, prompt_tokens=1000, completion_tokens=100)
    judge = Call(purpose="judge", model=CLAUDE, messages=[], completion="1",
                 usage=Usage(prompt_tokens=500, cache_write_tokens=400, completion_tokens=10))  # fmt: skip
    s3.attempts[0].calls.append(judge)
    a1 = make_record("a1", model=GPT, mode="adaptive", level=2, iteration=1)
    for level in (1, 2):
        _usage(a1, level, prompt_tokens=1000, completion_tokens=100)
    turn = Call(purpose="selector", model=GPT, messages=[], completion="2",
                usage=Usage(prompt_tokens=300, completion_tokens=5))  # fmt: skip
    a1.selections = [Selection(iteration=1, answer="2", level=2, call=turn)]
    tasks = {"boolq": TASKS["boolq"].info().model_dump()}
    return write_run(directory, [s1, s2, s3, a1], spec or {"tasks": tasks, "prices": RECORDED})


def test_report_costs_per_cell_level_and_resolved_sample(tmp_path: Path, book: PriceBook) -> None:
    run = costed_run(tmp_path / "run")
    standard, adaptive = collect([run], book)
    # GPT at 2 / 8 per million, cache reads 1; batched: half (input 1, read 0.5, output 4).
    # Claude (the map): 3 in, 3.75 cache write, 15 out.
    batched = (200 * 1 + 800 * 0.5 + 100 * 4) / 1e6  # s1, one batched call
    plain = (1000 * 2 + 100 * 8) / 1e6  # every other GPT call
    judge = (100 * 3 + 400 * 3.75 + 10 * 15) / 1e6
    assert standard.cost_usd == pytest.approx(batched + 6 * plain + judge)
    # s2's level 2 came from hpt's response cache: not spent, saved at its price.
    assert standard.saved_usd == pytest.approx((2000 * 2 + 200 * 8) / 1e6)
    # Two samples resolved.
    assert standard.cost_per_resolved == pytest.approx((batched + 6 * plain + judge) / 2)
    levels = {lv.where: lv for lv in standard.levels}
    assert list(levels) == ["1", "2", "3", "4", "5"]
    assert levels["1"].calls == 4 and levels["1"].batched_calls == 1
    assert levels["1"].cost_usd == pytest.approx(batched + 2 * plain + judge)
    assert levels["1"].cached_input_share == pytest.approx(800 / 3500)
    assert (levels["2"].calls, levels["2"].cached_calls) == (2, 1)
    assert levels["2"].cost_usd == pytest.approx(plain)
    assert levels["2"].saved_usd == pytest.approx(0.0056)
    assert levels["2"].cached_input_share is None  # no call there reported cache reads
    assert levels["5"].cost_usd == pytest.approx(plain)
    # The summary: provider cache reads (a reported 0 counts) and writes, batched calls.
    s = standard.summary
    assert (s.cache_read_tokens, s.cache_write_tokens, s.batched_calls) == (800, 400, 1)
    # The cached share is of the input sent: s2's level 2, answered by hpt's cache, is not.
    assert s.cached_input_share == pytest.approx(800 / 7500)
    assert standard.prices[GPT].source == "run"
    assert "cost map: claude-sonnet-4-5" in standard.prices[CLAUDE].source
    # Adaptive: the selector's turn apart, after the levels.
    assert [lv.where for lv in adaptive.levels] == ["1", "2", "selector"]
    assert adaptive.levels[-1].cost_usd == pytest.approx((300 * 2 + 5 * 8) / 1e6)
    assert adaptive.cost_per_resolved == adaptive.cost_usd == pytest.approx(2 * plain + 0.00064)


def test_report_markdown_and_csv_show_costs(tmp_path: Path, book: PriceBook) -> None:
    run = costed_run(tmp_path / "run")
    reports = collect([run], book)
    md = markdown(reports, [run])
    usage = _rows(md, "Calls, tokens and cost")
    assert usage[0] == ["dataset", "model", "mode", "samples", "calls (not sent)", "batched",
                        "prompt tokens", "cached input %", "completion tokens", "cost USD",
                        "USD / resolved", "saved USD"]  # fmt: skip
    assert usage[1] == ["boolq", GPT, "standard", "3", "9 (1)", "1", "9500", "10.7",
                        "910", "0.0198", "0.009875", "0.0056"]  # fmt: skip
    assert usage[-1][0] == "**total**" and usage[-1][-3:] == ["0.0260", "", "0.0056"]
    assert f"- `{GPT}`: input 2, output 8, cache read 1 USD per million tokens (run)" in md
    levels = _rows(md, "Calls, cached input and cost per level")
    assert levels[1] == ["boolq", GPT, "standard", "L1", "role", "4 (0)", "1", "3500", "22.9",
                         "310", "0.0086", "0.0000"]  # fmt: skip
    assert levels[-1][3:7] == ["selector", "", "1 (0)", "0"]
    cells_csv.write_csv(reports, tmp_path / "cells.csv")
    with (tmp_path / "cells.csv").open(newline="") as fh:
        reader = csv.DictReader(fh)
        rows = list(reader)
    # The columns readers had keep their places; the new ones come last.
    assert reader.fieldnames is not None and reader.fieldnames[:38] == list(CSV_COLUMNS[:38])
    assert reader.fieldnames[38:] == ["batched_calls", "cache_read_tokens", "cache_write_tokens",
                                      "cached_input_share", "cost_per_resolved_usd", "saved_usd"]  # fmt: skip
    assert float(rows[0]["cost_per_resolved_usd"]) == pytest.approx(0.009875)
    assert float(rows[0]["saved_usd"]) == pytest.approx(0.0056)
    assert rows[0]["cache_write_tokens"] == "400" and rows[1]["cache_read_tokens"] == ""


def test_a_call_shared_by_threshold_cells_is_paid_by_each_and_counted_once(
    tmp_path: Path, book: PriceBook
) -> None:
    # Two threshold cells ask s1's identical call once: the low cell's request answered
    # the high cell's (Call.shared). hpt's response cache answered the high cell's s2.
    low = make_record("s1", model=GPT, level=1, threshold=0.3)
    high = make_record("s1", model=GPT, level=1, threshold=0.6)
    _usage(low, 1, prompt_tokens=1000, cache_read_tokens=400, completion_tokens=100)
    twin = _usage(high, 1, prompt_tokens=1000, cache_read_tokens=400, completion_tokens=100)
    twin.cached = twin.shared = True
    hit = make_record("s2", model=GPT, level=1, threshold=0.6)
    _usage(hit, 1, prompt_tokens=1000, cache_read_tokens=1000, completion_tokens=100).cached = True
    tasks = {"boolq": TASKS["boolq"].info().model_dump()}
    run = write_run(tmp_path / "run", [low, high, hit], {"tasks": tasks, "prices": RECORDED})
    reports = collect([run], book)
    by_threshold = {r.cell.threshold: r for r in reports}
    paid = (600 * 2 + 400 * 1 + 100 * 8) / 1e6  # s1's call
    cache_hit = (1000 * 1 + 100 * 8) / 1e6
    # The shared call is the high cell's evaluation's as much as the low one's: its cost,
    # not a saving; only hpt's own cache saved anything.
    assert by_threshold[0.3].cost_usd == pytest.approx(paid)
    high_cell = by_threshold[0.6]
    assert high_cell.cost_usd == high_cell.shared_usd == pytest.approx(paid)
    assert high_cell.saved_usd == pytest.approx(cache_hit)
    # Its cached share is of the input sent for it: s1's, not s2's (answered by hpt's cache).
    assert high_cell.summary.cached_input_share == pytest.approx(0.4)
    assert high_cell.levels[0].cached_input_share == pytest.approx(0.4)
    md = markdown(reports, [run])
    assert "counted once in the total" in md
    usage = _rows(md, "Calls, tokens and cost")
    # The total counts the call once.
    assert usage[-1][0] == "**total**" and usage[-1][-3:] == [f"{paid:.4f}", "", f"{cache_hit:.4f}"]


def test_a_model_without_a_price_is_named(tmp_path: Path, book: PriceBook) -> None:
    """Run at a vLLM server (``--base-url``): no OpenAI price; the judge is still costed."""
    tasks = {"boolq": TASKS["boolq"].info().model_dump()}
    spec = {"tasks": tasks, "model": [GPT], "base_url": "http://127.0.0.1:8000/v1"}
    run = costed_run(tmp_path / "run", spec)
    reports = collect([run], book)
    assert reports[0].cost_usd is None and reports[0].prices[CLAUDE].input == 3.0
    md = markdown(reports, [run])
    assert _rows(md, "Calls, tokens and cost")[1][-3:] == ["910", "-", "-"]
    assert (f"- No cost for cells calling `{GPT}`: {GPT} is served by 127.0.0.1:8000, not by "
            f'openai: give it in --prices FILE (["{GPT}"] input = USD') in md  # fmt: skip
    # The user's file prices it; calls are costed at the map's gpt-4o otherwise.
    prices = tmp_path / "prices.toml"
    prices.write_text(f'["{GPT}"]\ninput = 0\noutput = 0\n')
    mine = collect([run], PriceBook.load(prices, cost_map=book.cost_map))
    judge = (100 * 3 + 400 * 3.75 + 10 * 15) / 1e6
    assert mine[0].cost_usd == pytest.approx(judge)
    listed = collect([costed_run(tmp_path / "listed", {"tasks": tasks})], book)
    assert listed[0].prices[GPT].input == 2.5 and listed[0].cost_usd is not None


def test_old_runs_report_as_before(tmp_path: Path, book: PriceBook) -> None:
    """Runs whose models have no price (named ones, unknown providers) or only self-hosted
    ones (free): the report reads as without prices -- no cost column, no notes."""
    for name, model in (("named", "alpha"), ("local", "local")):
        recs = [make_record("a", model=model, level=1), make_record("b", model=model, level=None)]
        run = write_run(tmp_path / name, recs)
        unpriced = markdown(collect([run]), [run])
        assert markdown(collect([run], book), [run]) == unpriced
        assert "cost" not in _rows(unpriced, "Calls, tokens and cost")[0][-1]
        assert "## Calls, cached input and cost per level" not in unpriced


def test_report_through_the_api_with_a_prices_file(tmp_path: Path) -> None:
    """The user's file over the run's recorded prices and the installed map."""
    run = costed_run(tmp_path / "run")
    prices = tmp_path / "prices.toml"
    prices.write_text(f'["{CLAUDE}"]\ninput = 1\noutput = 1\ncache_write = 1\n')
    written = api.report([run], prices=prices, plots=False)
    with (run / "report" / "cells.csv").open(newline="") as fh:
        standard = next(csv.DictReader(fh))
    # GPT as recorded: one batched call, six others; the judge at 1 USD per million each way.
    gpt = (200 * 1 + 800 * 0.5 + 100 * 4) / 1e6 + 6 * (1000 * 2 + 100 * 8) / 1e6
    assert float(standard["cost_usd"]) == pytest.approx(gpt + (100 + 400 + 10) / 1e6)
    listed = f"- `{CLAUDE}`: input 1, output 1, cache write 1 USD per million tokens"
    assert f"{listed} (prices.toml; cache reads billed as input)" in written.text


def _rows(md: str, section: str) -> list[list[str]]:
    """The first pipe table under ``## section``, header first, cells stripped."""
    body = md.split(f"## {section}", 1)[1].split("\n## ", 1)[0]
    lines = [line for line in body.splitlines() if line.startswith("|")]
    return [[c.strip() for c in line.strip("|").split("|")] for line in lines if "---|" not in line]
