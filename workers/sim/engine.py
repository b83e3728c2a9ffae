"""The simulated model's decisions, as pure functions of the request: no HTTP, no clock, no randomness
beyond a hash of the request.

Given the chat messages, the offered tools and the harness's cell key, the engine decides:
- is this a judge request (system text equals the judge prompt)? Then answer with JSON from the gold
  of the canned response found in the judge's message;
- otherwise which fixture (its task text appears in the user message) and which condition (the
  system text, compared with the packaged A-D instructions);
- which canned response to give, drawn with condition-dependent odds from a hash of the request's
  `seed` (sealed: the spec's `params: {seed: N}`; 0 when absent) and the cell key without its sweep id:
  a retry cannot change it, and two runs of one spec get the same answers (docs/SPEC.md);
- whether to answer with the next calculator call or with the final text.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from typing import Literal

from afpbench.fixtures.schema import FatalCriterionId
from afpbench.reference.protocol_facts import DIMENSIONS
from afpbench.workers.sim.canned import FALLBACK_TEXT, PLAIN_TEXT, STYLES, CannedResponse
from afpbench.workers.store.models import cell_place

# Odds of each canned style per condition. A has no instruction, so an AFP-shaped answer never occurs
# there; C and D (AFP, AFP with governance) pass more often and fail fatally less often, but are far from
# perfect, so a comparison over a simulated sweep shows a difference without a ceiling effect.
# "B-like" is any system text that is none of the packaged B/C/D texts (a user's own instruction set):
# it is treated as general guidance.
STYLE_ODDS: dict[str, dict[str, float]] = {
    "A": {"pass_plain": 0.40, "pass_afp": 0.00, "partial": 0.25, "fatal": 0.35},
    "B": {"pass_plain": 0.45, "pass_afp": 0.00, "partial": 0.25, "fatal": 0.30},
    "B-like": {"pass_plain": 0.45, "pass_afp": 0.00, "partial": 0.25, "fatal": 0.30},
    "C": {"pass_plain": 0.25, "pass_afp": 0.40, "partial": 0.20, "fatal": 0.15},
    "D": {"pass_plain": 0.20, "pass_afp": 0.50, "partial": 0.20, "fatal": 0.10},
}
CALCULATOR = "calculator"
JUDGE_GOLD_RATIONALE = "simulated judge: gold score"
JUDGE_UNKNOWN_RATIONALE = "simulated judge: unknown response"
_FATAL_ID = re.compile(r"\b(" + "|".join(c.value for c in FatalCriterionId) + r")\b")


def normalise_prompt(text: str) -> str:
    """Line endings to LF, trailing whitespace off every line and off the end: how instruction and judge
    texts are compared, so a client's CRLF or a trailing newline does not change the condition."""
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    return "\n".join(line.rstrip() for line in lines).strip()


def collapse_whitespace(text: str) -> str:
    return " ".join(text.split())


def content_text(content: object) -> str:
    """The text of a message content: a string, a list of OpenAI content parts, or null."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return ""


def count_tokens(text: str) -> int:
    # A rough whitespace count: enough for usage accounting and token-rate tests, not a tokenizer.
    return len(text.split())


def prompt_tokens(messages: list[dict]) -> int:
    return sum(count_tokens(content_text(m.get("content"))) for m in messages)


def conversation_key(messages: list[dict]) -> str:
    """A stable key for a request without a cell key: the opening system/user messages only, so every
    round of one tool-calling conversation (and every retry of it) maps to the same key."""
    opening = []
    for m in messages:
        if m.get("role") not in ("system", "developer", "user"):
            break
        opening.append({"role": m.get("role"), "content": content_text(m.get("content"))})
    return hashlib.sha256(json.dumps(opening, sort_keys=True, ensure_ascii=False).encode("utf-8")).hexdigest()


def offers_calculator(tools: list[dict] | None) -> bool:
    for tool in tools or []:
        fn = tool.get("function", tool) if isinstance(tool, dict) else {}
        if isinstance(fn, dict) and fn.get("name") == CALCULATOR:
            return True
    return False


def pick_style(odds: dict[str, float], available: set[str], u: float) -> str:
    """Walk the cumulative odds of the styles this fixture has; `u` is uniform in [0, 1).

    Styles without a canned response drop out and the rest are renormalised; if none of the available
    styles has positive odds for the condition, all available styles are equally likely."""
    weights = [(s, odds.get(s, 0.0)) for s in STYLES if s in available]
    total = sum(w for _, w in weights)
    if total <= 0:
        weights = [(s, 1.0) for s, _ in weights]
        total = float(len(weights))
    edge = 0.0
    for style, weight in weights:
        edge += weight / total
        if u < edge:
            return style
    return weights[-1][0]


@dataclass(frozen=True)
class ToolCall:
    id: str
    name: str
    arguments: str  # JSON text, as OpenAI sends it


@dataclass(frozen=True)
class Reply:
    kind: Literal["answer", "tool_call", "judge"]
    content: str | None
    finish_reason: str
    prompt_tokens: int
    completion_tokens: int
    tool_call: ToolCall | None = None
    fixture_id: str | None = None
    condition: str | None = None
    style: str | None = None  # a canned style, "fallback" or "plain"; None for a judge answer
    response_id: str | None = None


class SimEngine:
    """Pure decision logic; every input (tasks, canned responses, instruction texts, judge prompt) is
    passed in, so tests need no packaged files."""

    def __init__(
        self,
        tasks: dict[str, str],
        canned: dict[str, list[CannedResponse]],
        instructions: dict[str, str],
        judge_prompt: str | None = None,
        plain: bool = False,
    ) -> None:
        self.plain = plain
        self.canned = canned
        # Longest task first: if one task text contains another, the more specific fixture wins.
        self._tasks = sorted(
            ((fid, collapse_whitespace(t)) for fid, t in tasks.items() if t.strip()), key=lambda x: -len(x[1])
        )
        self._instructions = {
            c: normalise_prompt(t) for c, t in instructions.items() if c != "A" and t.strip()
        }
        self._judge_prompt = normalise_prompt(judge_prompt) if judge_prompt and judge_prompt.strip() else None
        self._judge_texts = sorted(
            ((collapse_whitespace(r.text), r) for rs in canned.values() for r in rs), key=lambda x: -len(x[0])
        )

    # --- detection -------------------------------------------------------------------------------

    @staticmethod
    def system_text(messages: list[dict]) -> str | None:
        parts = [content_text(m.get("content")) for m in messages if m.get("role") in ("system", "developer")]
        return "\n".join(parts) if parts else None

    @staticmethod
    def first_user_text(messages: list[dict]) -> str:
        return next((content_text(m.get("content")) for m in messages if m.get("role") == "user"), "")

    def is_judge(self, messages: list[dict]) -> bool:
        system = self.system_text(messages)
        return (
            self._judge_prompt is not None
            and system is not None
            and normalise_prompt(system) == self._judge_prompt
        )

    def detect_condition(self, system: str | None) -> str:
        if system is None or not system.strip():
            return "A"
        norm = normalise_prompt(system)
        for condition, text in sorted(self._instructions.items()):
            if norm == text:
                return condition
        return "B-like"

    def detect_fixture(self, user_text: str) -> str | None:
        haystack = collapse_whitespace(user_text)
        return next((fid for fid, task in self._tasks if task in haystack), None)

    # --- choice ----------------------------------------------------------------------------------

    def choose(self, fixture_id: str, condition: str, seed_material: str) -> CannedResponse:
        responses = self.canned[fixture_id]
        digest = hashlib.sha256(seed_material.encode("utf-8")).digest()
        u_style = int.from_bytes(digest[:8], "big") / 2**64
        style = pick_style(
            STYLE_ODDS.get(condition, STYLE_ODDS["B-like"]), {r.style for r in responses}, u_style
        )
        of_style = [r for r in responses if r.style == style]
        return of_style[int.from_bytes(digest[8:16], "big") % len(of_style)]

    @staticmethod
    def seed_material(cell_key: str | None, fixture_id: str, messages: list[dict], seed: int = 0) -> str:
        prefix = f"seed {seed}|" if seed else ""
        if cell_key:
            return f"{prefix}{cell_place(cell_key)}{fixture_id}"
        return prefix + conversation_key(messages)

    # --- answers ---------------------------------------------------------------------------------

    def respond(
        self, messages: list[dict], tools: list[dict] | None = None, cell_key: str | None = None, seed: int = 0
    ) -> Reply:
        n_prompt = prompt_tokens(messages)
        if self.is_judge(messages):
            content = json.dumps(self.judge_verdict(self._judge_user_text(messages)), ensure_ascii=False)
            return Reply("judge", content, "stop", n_prompt, count_tokens(content))
        condition = self.detect_condition(self.system_text(messages))
        if self.plain:
            return Reply("answer", PLAIN_TEXT, "stop", n_prompt, count_tokens(PLAIN_TEXT), condition=condition,
                         style="plain")
        fixture_id = self.detect_fixture(self.first_user_text(messages))
        if fixture_id is None or not self.canned.get(fixture_id):
            return Reply("answer", FALLBACK_TEXT, "stop", n_prompt, count_tokens(FALLBACK_TEXT),
                         fixture_id=fixture_id, condition=condition, style="fallback")
        seed_text = self.seed_material(cell_key, fixture_id, messages, seed)
        chosen = self.choose(fixture_id, condition, seed_text)
        step = sum(1 for m in messages if m.get("role") == "tool")
        if chosen.tool_calls and offers_calculator(tools) and step < len(chosen.tool_calls):
            arguments = json.dumps({"expression": chosen.tool_calls[step]})
            call_id = f"call_sim_{step + 1}_{hashlib.sha256(seed_text.encode('utf-8')).hexdigest()[:12]}"
            return Reply(
                "tool_call",
                None,
                "tool_calls",
                n_prompt,
                count_tokens(arguments),
                tool_call=ToolCall(call_id, CALCULATOR, arguments),
                fixture_id=fixture_id,
                condition=condition,
                style=chosen.style,
                response_id=chosen.id,
            )
        return Reply(
            "answer",
            chosen.text,
            "stop",
            n_prompt,
            count_tokens(chosen.text),
            fixture_id=fixture_id,
            condition=condition,
            style=chosen.style,
            response_id=chosen.id,
        )

    @staticmethod
    def _judge_user_text(messages: list[dict]) -> str:
        return "\n".join(content_text(m.get("content")) for m in messages if m.get("role") == "user")

    def find_response(self, judge_text: str) -> CannedResponse | None:
        """The canned response whose text (whitespace collapsed) appears in the judge's message."""
        haystack = collapse_whitespace(judge_text)
        return next((r for text, r in self._judge_texts if text and text in haystack), None)

    def judge_verdict(self, judge_text: str) -> dict:
        """Strict JSON for the judge (the shape scoring/judge.py parses): per-dimension score and rationale,
        and a flag per fatal criterion id named in the judge's message (the gold fatal if none is named)."""
        response = self.find_response(judge_text)
        named = list(dict.fromkeys(_FATAL_ID.findall(judge_text)))
        if response is None:
            scores = {d: {"score": 1, "rationale": JUDGE_UNKNOWN_RATIONALE} for d in DIMENSIONS}
            return {"scores": scores, "fatal": {c: {"flag": False, "quote": None} for c in named}}
        gold_fatal = response.gold.fatal.value if response.gold.fatal else None
        if (
            gold_fatal and not named
        ):  # a strict parser wants exactly the ids asked for; none asked: report gold
            named.append(gold_fatal)
        scores = {
            d: {"score": response.gold.scores[d], "rationale": JUDGE_GOLD_RATIONALE} for d in DIMENSIONS
        }
        fatal = {
            c: {"flag": True, "quote": response.text[:60]}
            if c == gold_fatal
            else {"flag": False, "quote": None}
            for c in named
        }
        return {"scores": scores, "fatal": fatal}
