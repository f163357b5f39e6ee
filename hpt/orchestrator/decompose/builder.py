"""The build's phases over every question (the package's docstring lists them): depth-3
answers, depth-2 and depth-1 sub-questions, deduplication, augmentation, depth-1 answers last;
then the graph (``assemble.py``) and its summary."""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from collections.abc import Sequence

from hpt.orchestrator.decompose.asker import Asker
from hpt.orchestrator.decompose.assemble import assemble
from hpt.orchestrator.decompose.dedup import (
    D1_LIKE_D2,
    D2_LIKE_D1,
    SAME_DEPTH,
    Dedup,
    Similarity,
    deduplicate,
    exact_similarity,
    vector_similarity,
)
from hpt.orchestrator.decompose.items import Item
from hpt.orchestrator.decompose.logs import fingerprint
from hpt.orchestrator.decompose.settings import MAX_CHILDREN
from hpt.orchestrator.decompose.sources import SourceQuestion
from hpt.orchestrator.decompose.summary import (
    CallSummary,
    DecomposeSummary,
    DedupSummary,
    Failure,
    GenerationSummary,
)
from hpt.tasks.depthqa.graph import QuestionGraph, describe


class Builder(Asker):
    """Builds the graph from the depth-3 rows, phase after phase (``run``)."""

    def _add_children(self, parent: Item, texts: Sequence[str], augmented: bool) -> list[Item]:
        made = []
        for n, text in enumerate(texts, 1):
            suffix = f"a{n}" if augmented else str(n)
            child = Item(
                id=f"{parent.id}.{suffix}",
                group=parent.group,
                depth=parent.depth - 1,
                text=text,
                parent=parent.id,
                augmented=augmented,
            )
            self.items[child.id] = child
            parent.children.append(child.id)
            made.append(child)
        return made

    async def _decompose(self, parent: Item) -> list[Item]:
        """Up to four sub-questions of a depth-3 (table 23) or depth-2 (table 24) question."""
        answer = self.answer_of(parent)
        if answer is None:
            return []
        section = "d2_questions" if parent.depth == 3 else "d1_questions"
        texts = await self._subquestions(
            parent, section, {"question": parent.text, "answer": answer}, MAX_CHILDREN
        )
        return self._add_children(parent, texts or [], augmented=False)

    async def _augment(self, parent: Item, current: list[str], count: int) -> list[Item]:
        answer = self.answer_of(parent)
        if answer is None or count < 1:
            return []
        section = "d2_augment" if parent.depth == 3 else "d1_augment"
        fields = {
            "question": parent.text,
            "answer": answer,
            "current_questions": json.dumps(current, ensure_ascii=False),
            "count": str(count),
        }
        texts = await self._subquestions(parent, section, fields, count)
        return self._add_children(parent, texts or [], augmented=True)

    async def _similarity(self, items: Sequence[Item]) -> Similarity:
        if self.embedder is None:
            return exact_similarity
        vectors = await self.embedder.embed([i.text for i in items])
        return vector_similarity({item.id: vectors[n] for n, item in enumerate(items)})

    async def _deduplicate(self, d2: list[Item], d1: list[Item]) -> Dedup:
        method = f"embeddings:{self.embedder.identity}" if self.embedder else "exact"
        inputs = fingerprint(
            method,
            [SAME_DEPTH, D2_LIKE_D1, list(D1_LIKE_D2)],
            [(i.id, i.depth, i.parent, i.text) for i in [*d2, *d1]],
        )
        hit = self.state.get("dedup", "all", inputs)
        if hit is not None:
            return Dedup.model_validate(hit["result"])
        similarity = await self._similarity([*d2, *d1])
        result = deduplicate(d2, d1, similarity)
        self.state.put("dedup", "all", inputs, {"result": result.model_dump()})
        return result

    async def run(self, sources: list[tuple[int, SourceQuestion]]) -> QuestionGraph:
        roots = []
        for position, source in sources:
            root = Item(id=str(position), group=str(position), depth=3, text=source.question)
            self.items[root.id] = root
            self.sources[root.id] = source
            roots.append(root)

        self.note(f"reference answers for {len(roots)} depth-3 questions")
        await self._answer_all(roots)
        for root in roots:
            if self.answer_of(root) is None:
                self.failures.append(Failure(item=root.id, question=root.text, step="d3_answer",
                                             problem="no reference answer"))  # fmt: skip
        self.note("depth-2 sub-questions (table 23)")
        d2 = [c for cs in await asyncio.gather(*(self._decompose(r) for r in roots)) for c in cs]
        await self._answer_all(d2)
        d2 = [i for i in d2 if self.answer_of(i) is not None]
        self.note(f"depth-1 sub-questions of {len(d2)} depth-2 questions (table 24)")
        d1 = [c for cs in await asyncio.gather(*(self._decompose(i) for i in d2)) for c in cs]

        self.note(
            f"deduplicating {len(d2)} depth-2 and {len(d1)} depth-1 questions"
            + ("" if self.embedder else " by exact text")
        )
        self.dedup = dedup = await self._deduplicate(d2, d1)
        removed, canonical = dedup.removed, dedup.canonical
        d2_ids = {i.id for i in d2}

        # Augmentation: as many new sub-questions as deduplication took, up to four in all.
        def kept_d2(root: Item) -> list[Item]:
            return [self.items[c] for c in root.children if c not in removed and c in d2_ids]

        def d1_questions(parent: Item) -> list[str]:
            # The distinct depth-1 questions a kept depth-2 question now has.
            seen: dict[str, str] = {}
            for c in parent.children:
                if c in removed or c not in canonical:
                    continue
                lead = canonical[c]
                seen.setdefault(lead, self.items[lead].text)
            return list(seen.values())

        d2_jobs = []
        for root in roots:
            made = [c for c in root.children if c in d2_ids]
            kept = kept_d2(root)
            lost = len(made) - len(kept)
            if lost > 0:
                current = [self.items[canonical[k.id]].text for k in kept]
                d2_jobs.append(self._augment(root, current, min(lost, MAX_CHILDREN - len(kept))))
        d1_jobs = []
        for item in d2:
            if item.id in removed:
                continue
            current = d1_questions(item)
            lost = len(item.children) - len(current)
            if lost > 0:
                d1_jobs.append(self._augment(item, current, min(lost, MAX_CHILDREN - len(current))))
        self.note(f"augmenting {len(d2_jobs)} depth-3 and {len(d1_jobs)} depth-2 questions")
        new_d2 = [c for cs in await asyncio.gather(*d2_jobs) for c in cs]
        new_d1 = [c for cs in await asyncio.gather(*d1_jobs) for c in cs]
        await self._answer_all(new_d2)
        new_d2 = [i for i in new_d2 if self.answer_of(i) is not None]
        d1_of_new = [c for cs in await asyncio.gather(*(self._decompose(i) for i in new_d2))
                     for c in cs]  # fmt: skip
        self.augmented = {"2": len(new_d2), "1": len(new_d1)}

        # Depth-1 answers last: one per question left in the graph.
        final_d1 = [self.items[canonical[i.id]] for i in d1 if i.id in canonical]
        final_d1 += new_d1 + d1_of_new
        self.note(f"reference answers for {len({i.text for i in final_d1})} depth-1 questions")
        await self._answer_all(final_d1)
        return assemble(self, roots, d2, new_d2, dedup)

    def summary(self, graph: QuestionGraph, note: str | None) -> DecomposeSummary:
        """What ``decompose_summary.json`` says of the build and its ``graph``; ``note`` says
        where deduplication fell short of the paper's (``EXACT_NOTE``)."""
        shape = describe(graph)
        removed = Counter(self.dedup.removed.values())
        canonical = self.dedup.canonical
        d2_shared = sum(1 for k, v in canonical.items()
                        if k != v and self.items[k].depth == 2)  # fmt: skip
        d1_in_tree = sum(1 for k, v in canonical.items() if k != v and self.items[k].depth == 1
                         and self.items[k].group == self.items[v].group)  # fmt: skip
        d1_across = sum(1 for k, v in canonical.items() if k != v and self.items[k].depth == 1
                        and self.items[k].group != self.items[v].group)  # fmt: skip
        replies = sum(int(g.get("replies", 0)) for g in self.generations)
        stats = self.model.stats
        emb = self.embedder.stats if self.embedder else None
        return DecomposeSummary(
            questions={str(d): v["questions"] for d, v in shape["by_depth"].items()},
            nodes={str(d): v["nodes"] for d, v in shape["by_depth"].items()},
            edges=shape["edges"],
            shared_questions=shape["shared"],
            dedup=DedupSummary(
                method="embeddings" if self.embedder else "exact-text",
                embedding_model=self.embedder.label if self.embedder else None,
                note=note,
                thresholds={
                    "same_depth": SAME_DEPTH,
                    "d2_like_d1": D2_LIKE_D1,
                    "d1_like_d2": list(D1_LIKE_D2),
                },
                d2_removed_like_d1=removed["d2 like d1"],
                d2_duplicates_removed=removed["duplicate"],
                d2_shared_across_trees=d2_shared,
                d1_removed_like_d2=removed["d1 like d2"],
                d1_removed_with_parent=sum(
                    1
                    for k, why in self.dedup.removed.items()
                    if why == "parent removed" and self.items[k].depth == 1
                ),
                d1_merged_in_tree=d1_in_tree,
                d1_shared_across_trees=d1_across,
            ),
            augmented=self.augmented,
            generation=GenerationSummary(
                json_replies=replies,
                json_retries=replies - len(self.generations),
                json_failures=len([f for f in self.failures if f.step != "d3_answer"]),
                cut_to_max=sum(1 for g in self.generations if int(g.get("cut", 0)) > 0),
            ),
            calls=CallSummary(
                model_requests=stats.calls,
                cache_hits=stats.cache_hits,
                steps_from_checkpoint=self.state.reused,
                embedding_requests=emb.requests if emb else 0,
                texts_embedded=emb.embedded if emb else 0,
                embeddings_cached=emb.cached if emb else 0,
            ),
            failures=self.failures,
            errors=self.errors,
        )
