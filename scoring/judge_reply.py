"""One judge reply read as a judgement, and what the next try changes when it cannot be used.

A reply cut at the token limit is not a JSON error: it says "truncated at max_tokens (N tokens)" and,
when the text ends in a repetition loop (scoring/repetition.py), names the loop. Any other unusable
reply keeps the strict parse's reason (scoring/judge.py), with a loop named too if there is one.

A retry must differ from the try it repeats: at temperature 0 an identical request returns identical
text, so asking again unchanged only repeats the failure. The next try feeds the reason back at the
end of the user message (the judge stays blind: the reason names the reply's fault, never the
condition); the change made is returned so the judgement row can record it.
"""

from __future__ import annotations

from dataclasses import dataclass

from afpbench.scoring.judge import Judgement, JudgementError, read_judgement
from afpbench.scoring.render import Message
from afpbench.scoring.repetition import repetition_loop

TRUNCATED = "truncated at max_tokens"
_QUOTE_ADVICE = (
    "A true flag's quote must be copied from the RESPONSE TO JUDGE block, not from the rubric, the fatal "
    "criteria or the user message; if the response contains no such text, the flag is false."
)


@dataclass(frozen=True)
class JudgeReply:
    text: str
    finish_reason: str | None = None
    output_tokens: int | None = None


def truncation_reason(output_tokens: int | None) -> str:
    return f"{TRUNCATED} ({output_tokens} tokens)" if output_tokens is not None else TRUNCATED


def read_reply(reply: JudgeReply, fatal_ids: list[str], response_text: str) -> Judgement | JudgementError:
    """The judgement, or why this reply cannot be used (truncation first: a cut reply is never parsed)."""
    loop = repetition_loop(reply.text)
    loop_note = f"; {loop.describe()}" if loop else ""
    if reply.finish_reason == "length":
        return JudgementError(truncation_reason(reply.output_tokens) + loop_note)
    parsed = read_judgement(reply.text, fatal_ids, response_text)
    if isinstance(parsed, JudgementError) and loop_note:
        return JudgementError(parsed.reason + loop_note, parsed.unsupported)
    return parsed


def retry_messages(messages: list[Message], error: JudgementError, try_number: int = 2) -> tuple[list[Message], str]:
    """The messages of try `try_number` (the original ones with the reason fed back), and that change as
    one line for the record. Built from the original messages each time, so feedback never piles up.
    The try is numbered in the text: at temperature 0 the same reason fed back twice is the same request
    and gives the same reply (seen on a real llama.cpp judge), so each try's request must differ."""
    advice = [f"Try {try_number}. Your previous reply could not be used: {error.reason}."]
    if error.unsupported:
        advice.append(_QUOTE_ADVICE)
    if error.reason.startswith(TRUNCATED):
        advice.append("Keep each rationale to one or two sentences and do not repeat yourself.")
    advice.append("Reply again with one JSON object in the format above and nothing else.")
    note = " ".join(advice)
    *head, last = messages
    changed = [*head, {**last, "content": f"{last['content']}\n{note}\n"}]
    return changed, f"parse error fed back (try {try_number}): {error.reason}"
