"""``hpt decompose``: build a DepthQA question graph from depth-3 questions (DepthQA section 3.3,
appendix A, prompts in appendix J.1 tables 20-26).

The steps, each a phase over every question:

1. a reference answer for each depth-3 question that has none (table 20);
2. up to four depth-2 sub-questions of each (system table 22, user table 23);
3. a reference answer for each depth-2 question (table 21);
4. up to four depth-1 sub-questions of each depth-2 question (table 24);
5. deduplication (``deduplicate``), with embeddings from ``--embedding-model`` or, without
   one, by exact (normalised) text;
6. augmentation: a question that lost sub-questions to deduplication gets as many new ones as
   it lost, never more than four in all (tables 25 and 26); a new depth-2 question is answered
   and decomposed like the others. Deduplication runs once, before augmentation, so what
   augmentation adds is not deduplicated again (the paper's table 4 still shows a 0.93 pair
   "after deduplication and augmentation");
7. a reference answer for each depth-1 question left (table 21) -- last, so that questions
   deduplication removes are never answered.

Sub-questions are read from the model's JSON reply and validated; a reply that is not the
asked-for shape is asked again (``JSON_ATTEMPTS`` tries in all, each with its own cache seed).
A question that never gets valid JSON keeps no sub-questions and is listed in the summary. A
list longer than four is cut to its first four (the paper's own examples list five and six,
so models often do; a cut costs nothing, a refusal a call) and the cuts are counted.

Ids follow the hub's (``assemble``): the n-th depth-3 row of the input (counted before
--limit) is group ``n`` with nodes ``n_d3``, ``n_d2_nK``, ``n_d1_nK``; depth-3 questions keep
their qid and the generated ones are numbered ``d2_qN`` and ``d1_qN``.

Every reply the model gave is appended to ``decompose_replies.jsonl`` beside what was read
from it (``ReplyLog``), so a question left without sub-questions shows why.

Resuming: every finished step is appended to ``decompose_state.jsonl`` in the output folder,
keyed by what it was computed from (a hash of the prompt, or of the questions deduplicated).
A rerun replays the steps whose inputs are unchanged and calls the model for the rest; every
call also goes through hpt's response cache, so even a step lost from the checkpoint costs
nothing the second time. The graph files and ``decompose_summary.json`` are written last; the
summary marks a finished folder, which a rerun refuses unless ``resume`` is set.

The package's modules: ``settings`` (the command's options and files), ``sources`` (the depth-3
rows), ``messages`` (the prompts each step sends), ``reply_json`` (reading the model's JSON),
``logs`` (the checkpoint and the reply log), ``items`` (the questions being built), ``dedup``,
``asker`` (the checkpointed calls), ``builder`` (the phases), ``assemble`` (the graph),
``summary`` (``decompose_summary.json``) and ``pipeline`` (``run_decompose``).
"""

from hpt.orchestrator.decompose.dedup import (
    D1_LIKE_D2,
    D2_LIKE_D1,
    EXACT_NOTE,
    SAME_DEPTH,
    Dedup,
    deduplicate,
    exact_similarity,
    vector_similarity,
)
from hpt.orchestrator.decompose.items import Item
from hpt.orchestrator.decompose.messages import d3_answer_messages
from hpt.orchestrator.decompose.pipeline import prepare_out, resolve_embedding, run_decompose
from hpt.orchestrator.decompose.reply_json import parse_questions
from hpt.orchestrator.decompose.settings import (
    DEFAULT_TEMPERATURE,
    JSON_ATTEMPTS,
    MAX_CHILDREN,
    PROMPTS,
    REPLIES_FILE,
    STATE_FILE,
    SUMMARY_FILE,
    DecomposeSpec,
    Note,
)
from hpt.orchestrator.decompose.sources import SourceQuestion, load_depth3
from hpt.orchestrator.decompose.summary import (
    CallSummary,
    DecomposeSummary,
    DedupSummary,
    Failure,
    GenerationSummary,
)

__all__ = [
    "D1_LIKE_D2",
    "D2_LIKE_D1",
    "DEFAULT_TEMPERATURE",
    "EXACT_NOTE",
    "JSON_ATTEMPTS",
    "MAX_CHILDREN",
    "PROMPTS",
    "REPLIES_FILE",
    "SAME_DEPTH",
    "STATE_FILE",
    "SUMMARY_FILE",
    "CallSummary",
    "DecomposeSpec",
    "DecomposeSummary",
    "Dedup",
    "DedupSummary",
    "Failure",
    "GenerationSummary",
    "Item",
    "Note",
    "SourceQuestion",
    "d3_answer_messages",
    "deduplicate",
    "exact_similarity",
    "load_depth3",
    "parse_questions",
    "prepare_out",
    "resolve_embedding",
    "run_decompose",
    "vector_similarity",
]
