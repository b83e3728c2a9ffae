"""Judge messages and strict parsing of a judgement.

The judge sees what the model saw (the user message), the outcome requirement, the fixture's anchors
and fatal criteria, and the response. It never sees the condition label or the system instruction,
so it cannot reward or punish the instruction set for its own sake (validity gate item 5).

Fixture and response text are data: inserted verbatim, never through str.format. Each block is
fenced by a marker carrying a hash of its own content, so a response cannot forge the end of its block.

A judgement must be one JSON object (optionally inside a single ```json fence, nothing else):

    {"scores": {"<dimension>": {"score": 0|1|2, "rationale": "..."}, ... all four ...},
     "fatal": {"<criterion id>": {"flag": true|false, "quote": "..." or null}, ... one per criterion ...}}

Where the judge's provider supports structured output, the same shape is also sent as a JSON Schema
(`judgement_schema`: the fixture's dimensions and fatal criterion ids, rationales and quotes capped in
length); the parse below stays exactly as strict either way.

A flagged fatal must quote the response (an unflagged one may give null or ""). `verify_quotes` turns a
flagged fatal whose quote is not in the response (after normalising case, whitespace, Markdown emphasis
and typographic marks: scoring/quotes.py) into a JudgementError: a judge error, which the caller treats
like a parse failure and asks again, within its bounded retries; a judge that never produces a supported
judgement makes the cell GRADER_DISPUTE, never a fail.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field
from typing import Any

from afpbench.fixtures.schema import Fixture
from afpbench.reference.protocol_facts import DIMENSIONS
from afpbench.scoring.quotes import quote_in
from afpbench.scoring.render import Message, render_user_message

_FENCED = re.compile(r"\A\s*```json[ \t]*\n(.*)\n[ \t]*```\s*\Z", re.DOTALL)
JUDGEMENT_SCHEMA_NAME = "record_judgement"
JUDGEMENT_SCHEMA_DESCRIPTION = (
    "Record the judgement: per dimension a score and rationale, per fatal criterion a flag and quote."
)
RATIONALE_MAX_CHARS = 400
QUOTE_MAX_CHARS = 300  # a flagged fatal quotes the response; the span that shows it, not the whole answer


@dataclass(frozen=True)
class Judgement:
    scores: dict[str, int]
    rationales: dict[str, str]
    fatal_flags: dict[str, bool]
    quotes: dict[str, str]
    total: int = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "total", sum(self.scores.values()))

    def flagged(self) -> list[str]:
        return [c for c, flag in self.fatal_flags.items() if flag]


@dataclass(frozen=True)
class JudgementError:
    """A judgement that cannot be used; `reason` says why (kept with the attempt for the record)."""

    reason: str
    unsupported: list[str] = field(default_factory=list)  # fatal ids whose quote was not found


def _block(title: str, body: str) -> str:
    tag = hashlib.sha256(body.encode("utf-8")).hexdigest()[:12]
    return f"<<<{title} {tag}>>>\n{body.rstrip()}\n<<<END {title} {tag}>>>"


def _format_block(dimensions: list[str], fatal_ids: list[str]) -> str:
    dims = ", ".join(f'"{d}": {{"score": 0|1|2, "rationale": "..."}}' for d in dimensions)
    fatal = ", ".join(f'"{c}": {{"flag": true|false, "quote": "..." or null}}' for c in fatal_ids)
    lines = [
        "Reply with one JSON object and nothing else:",
        f'{{"scores": {{{dims}}}, "fatal": {{{fatal}}}}}',
        "Every dimension needs an integer score and a non-empty rationale. Every fatal criterion needs a "
        "true/false flag; a true flag needs a quote copied exactly from the response.",
    ]
    return "\n".join(lines)


def build_judge_messages(
    fixture: Fixture,
    response_text: str,
    judge_prompt: str,
    originated_figures: list[str],
    swapped: bool = False,
) -> list[Message]:
    """[system = judge prompt, user = the materials]; swapped puts the response first and reverses the
    order of dimensions and fatal criteria (the blind order-swapped re-judge)."""
    dimensions: list[str] = list(DIMENSIONS)
    fatal = list(fixture.fatal_criteria)
    if swapped:
        dimensions.reverse()
        fatal.reverse()
    anchors = dict(fixture.anchors.items())
    anchor_text = "\n\n".join(
        "\n".join([f"{d}:"] + [f"  {s}: {anchors[d].for_score(s)}" for s in (0, 1, 2)]) for d in dimensions
    )
    fatal_text = "\n".join(f"{f.criterion.value}: {f.wording}" for f in fatal)
    context = [
        _block("USER MESSAGE SHOWN TO THE MODEL (task and evidence, verbatim)", render_user_message(fixture)),
        _block("OUTCOME REQUIREMENT", fixture.outcome_requirement),
        _block("RUBRIC ANCHORS (score 0, 1, 2 per dimension)", anchor_text),
        _block("FATAL CRITERIA (flag any that the response meets)", fatal_text),
    ]
    if fixture.numeric is not None:
        listed = "\n".join(originated_figures) if originated_figures else "none"
        context.append(_block("FIGURES IN THE RESPONSE NOT TRACEABLE TO THE EVIDENCE (originated)", listed))
    response = _block("RESPONSE TO JUDGE", response_text)
    blocks = [response, *context] if swapped else [*context, response]
    blocks.append(_block("ANSWER FORMAT", _format_block(dimensions, [f.criterion.value for f in fatal])))
    return [
        {"role": "system", "content": judge_prompt},
        {"role": "user", "content": "\n\n".join(blocks) + "\n"},
    ]


def _object(properties: dict[str, dict[str, Any]]) -> dict[str, Any]:
    return {"type": "object", "properties": properties, "required": list(properties), "additionalProperties": False}


def judgement_schema(fixture: Fixture, swapped: bool = False) -> dict[str, Any]:
    """The judgement's JSON Schema for this fixture: exactly its four dimensions (score 0, 1 or 2 and a
    rationale of 1..RATIONALE_MAX_CHARS characters) and one entry per fatal criterion it declares (a
    flag, and a quote of at most QUOTE_MAX_CHARS characters or null). In the swapped re-judge the keys
    come in the reversed order the prompt uses, so constrained decoding does not undo the swap."""
    dimensions = list(DIMENSIONS)
    fatal_ids = fixture.fatal_ids()
    if swapped:
        dimensions.reverse()
        fatal_ids.reverse()
    score: dict[str, dict[str, Any]] = {
        "score": {"type": "integer", "enum": [0, 1, 2]},
        "rationale": {"type": "string", "minLength": 1, "maxLength": RATIONALE_MAX_CHARS},
    }
    fatal: dict[str, dict[str, Any]] = {
        "flag": {"type": "boolean"},
        "quote": {"type": ["string", "null"], "maxLength": QUOTE_MAX_CHARS},
    }
    return _object({
        "scores": _object({d: _object(score) for d in dimensions}),
        "fatal": _object({c: _object(fatal) for c in fatal_ids}),
    })


def _no_duplicate_keys(pairs: list[tuple[str, object]]) -> dict[str, object]:
    keys = [k for k, _ in pairs]
    dupes = sorted({k for k in keys if keys.count(k) > 1})
    if dupes:
        raise ValueError(f"duplicate key(s) {dupes}")
    return dict(pairs)


def _reject_constant(name: str) -> object:
    raise ValueError(f"non-standard JSON constant {name}")


def _exact_keys(obj: object, expected: list[str], where: str) -> str | None:
    if not isinstance(obj, dict):
        return f"{where} is not an object"
    missing = [k for k in expected if k not in obj]
    extra = sorted(k for k in obj if k not in expected)
    if missing or extra:
        return f"{where}: missing {missing}, unexpected {extra}"
    return None


def parse_judgement(raw_text: str, fatal_ids: list[str]) -> Judgement | JudgementError:
    """Strict: one JSON object (bare or in one ```json fence), exactly the four dimensions and exactly
    one fatal entry per expected criterion id. Anything else is a JudgementError."""
    fenced = _FENCED.match(raw_text)
    body = fenced.group(1) if fenced else raw_text
    try:
        data = json.loads(body, object_pairs_hook=_no_duplicate_keys, parse_constant=_reject_constant)
    except ValueError as exc:  # json.JSONDecodeError is a ValueError
        return JudgementError(f"not a single JSON object: {exc}")
    problem = _exact_keys(data, ["scores", "fatal"], "judgement")
    if problem:
        return JudgementError(problem)
    problem = _exact_keys(data["scores"], list(DIMENSIONS), "scores") or _exact_keys(
        data["fatal"], list(fatal_ids), "fatal"
    )
    if problem:
        return JudgementError(problem)
    scores: dict[str, int] = {}
    rationales: dict[str, str] = {}
    flags: dict[str, bool] = {}
    quotes: dict[str, str] = {}
    for dim in DIMENSIONS:
        entry = data["scores"][dim]
        problem = _exact_keys(entry, ["score", "rationale"], f"scores.{dim}")
        if problem:
            return JudgementError(problem)
        score, rationale = entry["score"], entry["rationale"]
        if type(score) is not int or not 0 <= score <= 2:  # bool and 2.0 are not scores
            return JudgementError(f"scores.{dim}.score {score!r} is not an integer 0..2")
        if not isinstance(rationale, str) or not rationale.strip():
            return JudgementError(f"scores.{dim}.rationale is empty or not text")
        scores[dim], rationales[dim] = score, rationale.strip()
    for cid in fatal_ids:
        entry = data["fatal"][cid]
        problem = _exact_keys(entry, ["flag", "quote"], f"fatal.{cid}")
        if problem:
            return JudgementError(problem)
        flag, quote = entry["flag"], entry["quote"]
        if not isinstance(flag, bool):
            return JudgementError(f"fatal.{cid}.flag {flag!r} is not true/false")
        if quote is not None and not isinstance(quote, str):
            return JudgementError(f"fatal.{cid}.quote is neither text nor null")
        if flag and not (quote or "").strip():
            return JudgementError(f"fatal.{cid} is flagged without a quote from the response")
        flags[cid], quotes[cid] = flag, quote or ""
    return Judgement(scores=scores, rationales=rationales, fatal_flags=flags, quotes=quotes)


def verify_quotes(judgement: Judgement, response_text: str) -> Judgement | JudgementError:
    """The judgement unchanged, or a JudgementError naming every flagged fatal whose quote is not in the
    response, compared after normalising case, whitespace, Markdown emphasis and typographic quotes,
    apostrophes and dashes (scoring/quotes.py). The caller treats that as a judge error and asks again."""
    unsupported = [c for c in judgement.flagged() if not quote_in(judgement.quotes[c], response_text)]
    if unsupported:
        return JudgementError(f"flagged fatal quote not found in the response: {unsupported}", unsupported)
    return judgement


def read_judgement(raw_text: str, fatal_ids: list[str], response_text: str) -> Judgement | JudgementError:
    """parse_judgement then verify_quotes: what one judging attempt yields."""
    parsed = parse_judgement(raw_text, fatal_ids)
    return parsed if isinstance(parsed, JudgementError) else verify_quotes(parsed, response_text)
