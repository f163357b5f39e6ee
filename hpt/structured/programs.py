"""DSPy programs built from a dataset's ``[dspy]`` prompt section, and their files.

The ``[dspy]`` section of a dataset's prompt file seeds the program as the paper does (HELM's
instruction, no demos)::

    [dspy]
    instruction = "..."          # the signature's instructions
    output = "answer"            # the output field (what the task parses)
    output_desc = "..."          # its description
    [dspy.inputs]                # each input field and its template over the sample's fields
    question = "{question}"

Saved programs are DSPy's own ``program.save(path)`` JSON. ``load_program`` accepts that JSON
from this or another single-predictor program, a dspy-helm agent included: see
``load_program_state`` for the shapes it takes.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from hpt.structured.engine import import_dspy
from hpt.tasks import DatasetError, Sample, Task

SECTION = "dspy"
Module = Literal["predict", "cot"]


HELM = "helm_baseline"
# dspy-helm's agents (StanfordMIMI/dspy-helm, the structured-prompting paper's own programs)
# have one input field holding HELM's whole prompt and one output field.
HELM_AGENT_FIELDS = ("inputs", "output")


@dataclass(frozen=True)
class DspySpec:
    instruction: str
    inputs: dict[str, str]  # field name -> template
    output: str
    output_desc: str
    # The prompt-file section the input templates render in.
    section: str = SECTION

    @classmethod
    def of(cls, task: Task) -> DspySpec:
        if not task.prompts.has(SECTION):
            raise DatasetError(
                f"{task.name}: its prompt file has no [{SECTION}] section, which the DSPy "
                f"strategies need (instruction, output, output_desc, [{SECTION}.inputs])"
            )
        section = task.prompts.section(SECTION)
        inputs = section.get("inputs")
        if not isinstance(inputs, Mapping) or not inputs:
            raise DatasetError(f"{task.name}: [{SECTION}.inputs] must map field names to templates")
        instruction = section.get("instruction")
        if not isinstance(instruction, str):
            raise DatasetError(f"{task.name}: [{SECTION}] needs an instruction")
        return cls(
            instruction=instruction,
            inputs={str(k): str(v) for k, v in inputs.items()},
            output=str(section.get("output", "answer")),
            output_desc=str(section.get("output_desc", "")),
        )

    @classmethod
    def helm_agent(cls, task: Task, instruction: str) -> DspySpec:
        """The signature of a dspy-helm agent: ``inputs`` (the dataset's HELM prompt, as
        ``[helm_baseline]`` renders it) -> ``output``."""
        if not task.prompts.has(HELM):
            raise DatasetError(f"{task.name}: a dspy-helm agent needs its [{HELM}] prompt")
        return cls(
            instruction=instruction,
            inputs={HELM_AGENT_FIELDS[0]: task.prompts.text(HELM, "user")},
            output=HELM_AGENT_FIELDS[1],
            output_desc="",
            section=HELM,
        )

    def render(self, task: Task, sample: Sample) -> dict[str, str]:
        return {
            name: task.prompts.render(self.section, template, sample.fields)
            for name, template in self.inputs.items()
        }


def build_program(spec: DspySpec, module: Module) -> Any:
    """The zero-shot program: dspy.Predict or dspy.ChainOfThought over the spec's signature."""
    dspy = import_dspy()
    fields: dict[str, Any] = {name: (str, dspy.InputField()) for name in spec.inputs}
    fields[spec.output] = (str, dspy.OutputField(desc=spec.output_desc or None))
    signature = dspy.make_signature(fields, spec.instruction)
    return dspy.Predict(signature) if module == "predict" else dspy.ChainOfThought(signature)


def examples(task: Task, spec: DspySpec, samples: Sequence[Sample]) -> list[Any]:
    """DSPy examples of ``samples``: the rendered inputs and the labelled answer (the worked
    answer where the dataset has one, as a labelled demo shows it)."""
    dspy = import_dspy()
    out = []
    for s in samples:
        label = s.shown_answer or s.target
        out.append(dspy.Example(**spec.render(task, s), **{spec.output: label})
                   .with_inputs(*spec.inputs))  # fmt: skip
    return out


def split(pool: Sequence[Sample], train_fraction: float, seed: int,
          limit: int | None = None) -> tuple[list[Sample], list[Sample]]:  # fmt: skip
    """A seeded train/validation split of the training pool (optionally capped first)."""
    items = list(pool)
    random.Random(seed).shuffle(items)
    if limit is not None:
        items = items[:limit]
    if len(items) < 2:
        return items, []
    n_val = min(len(items) - 1, max(1, round(len(items) * (1.0 - train_fraction))))
    return items[n_val:], items[:n_val]


def save_program(program: Any, path: Path) -> None:
    """DSPy's own JSON (``program.save``), written whole or not at all."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.stem + ".tmp.json")
    try:
        program.save(str(tmp))
        tmp.replace(path)
    finally:
        tmp.unlink(missing_ok=True)  # gone after the replace; a failed save leaves none


def _predictor_states(data: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
    return {
        name: value
        for name, value in data.items()
        if name != "metadata" and isinstance(value, Mapping) and "signature" in value
    }


def load_program(path: Path, task: Task, module: Module) -> tuple[Any, DspySpec]:
    """A program saved by hpt, by DSPy for this dataset's ``[dspy]`` signature, or by
    dspy-helm (demos keyed ``inputs``/``output``: the program then asks with the dataset's
    HELM prompt as its one input, as dspy-helm did), and the signature it answers with."""
    spec = DspySpec.of(task)
    demos = [d for state in _states_of(path).values() for d in state.get("demos") or []]
    if _keyed_by(demos, HELM_AGENT_FIELDS) and not _keyed_by(demos, spec.inputs):
        spec = DspySpec.helm_agent(task, spec.instruction)
    program = build_program(spec, module)
    load_program_state(program, path, spec)
    return program, spec


def _keyed_by(demos: Sequence[Any], fields: Iterable[str]) -> bool:
    """Every demo has all of ``fields`` (and there is at least one demo)."""
    wanted = set(fields)
    return bool(demos) and all(isinstance(d, Mapping) and wanted <= set(d) for d in demos)


def _states_of(path: Path) -> dict[str, Mapping[str, Any]]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise DatasetError(f"--program {path}: cannot read a DSPy program ({exc})") from None
    states = _predictor_states(data) if isinstance(data, Mapping) else {}
    if len(states) != 1:
        found = ", ".join(states) or "none"
        raise DatasetError(
            f"--program {path}: expected DSPy's saved-program JSON with exactly one predictor "
            f"(an object with a 'signature'); found {found}"
        )
    return states


def load_program_state(program: Any, path: Path, spec: DspySpec) -> None:
    """Load a saved program's instruction and demos into ``program`` (one predictor).

    Accepted: DSPy's saved-program JSON (``Module.save(path)`` / ``dump_state``): a JSON
    object of predictor name -> predictor state, plus an optional ``"metadata"`` entry. A
    predictor state is an object with ``"signature"`` (``{"instructions": str, "fields":
    [{"prefix", "description"}, ...]}``) and optionally ``"demos"`` (a list of objects, one
    per demo, keyed by field name; ``"augmented": true`` marks a bootstrapped one),
    ``"traces"``, ``"train"``, ``"lm"`` (ignored: hpt calls the run's model). Exactly one
    predictor must be present, under any name: ``"self"`` (a bare Predict), ``"predict"``
    (a ChainOfThought) or a dotted path such as ``"prog.predict"`` (a module wrapping one).
    Its instructions replace the seed instruction; its field prefixes and descriptions are
    applied when it has as many fields as ``program``'s signature; its demos must carry this
    dataset's ``[dspy.inputs]`` fields and output field.
    """
    (name, state), = _states_of(path).items()  # fmt: skip
    signature = state["signature"]
    if not isinstance(signature, Mapping) or not isinstance(signature.get("instructions"), str):
        raise DatasetError(f"--program {path}: predictor {name!r} has no signature instructions")
    demos = state.get("demos") or []
    needed = {*spec.inputs, spec.output}
    for i, demo in enumerate(demos):
        missing = needed - set(demo) if isinstance(demo, Mapping) else needed
        if missing:
            raise DatasetError(
                f"--program {path}: demo {i + 1} of {name!r} lacks the field(s) "
                f"{', '.join(sorted(missing))} of this dataset's [{SECTION}] signature "
                f"({', '.join(sorted(needed))})"
            )
    dspy = import_dspy()
    (_, predictor), = program.named_predictors()  # fmt: skip
    ours = predictor.signature
    saved_fields = signature.get("fields") or []
    if len(saved_fields) == len(ours.fields):
        ours = ours.load_state({"instructions": signature["instructions"], "fields": saved_fields})
    else:
        ours = ours.with_instructions(signature["instructions"])
    predictor.signature = ours
    predictor.demos = [dspy.Example(**dict(d)) for d in demos]


def program_summary(program: Any) -> dict[str, Any]:
    """What a program holds, for notes: its instruction and demo count."""
    (_, predictor), = program.named_predictors()  # fmt: skip
    return {"instructions": predictor.signature.instructions, "demos": len(predictor.demos)}
