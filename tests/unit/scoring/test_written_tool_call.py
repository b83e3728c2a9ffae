"""A tool call written as text is detected, named and never turned into a call (scoring/written_tool_call.py).

Texts here are SIMULATED shapes of the chat-template conventions; the shapes recorded from a real model
are checked in tests/unit/scoring/test_realmodel_shapes.py."""

import pytest

from afpbench.scoring.written_tool_call import written_tool_calls

OFFERED = ["calculator"]


@pytest.mark.parametrize("text", [
    '{"name": "calculator", "arguments": {"expression": "1200 * 0.15"}}',
    '```json\n{"name": "calculator", "arguments": {"expression": "1200 * 0.15"}}\n```',
    '<tool_call>\n{"name": "calculator", "arguments": {"expression": "1200 * 0.15"}}\n</tool_call>',
    '{"type": "function", "function": {"name": "calculator", "arguments": "{\\"expression\\": \\"1200 * 0.15\\"}"}}',
    '[{"name": "calculator", "parameters": {"expression": "1200 * 0.15"}}]',
])
def test_the_whole_answer_is_a_written_call_in_each_template_shape(text):
    found = written_tool_calls(text, OFFERED)
    assert found is not None and found.whole_answer
    assert [c.name for c in found.calls] == ["calculator"] and found.calls[0].offered
    assert "the whole answer is a tool call written as text (calculator)" in found.describe()


def test_a_call_inside_prose_is_found_and_the_answer_is_not_only_the_call():
    text = 'First the fee:\n```json\n{"name": "calculator", "arguments": {"expression": "2*3"}}\n```\nThen 6.'
    found = written_tool_calls(text, OFFERED)
    assert found is not None and not found.whole_answer
    assert found.calls[0].arguments == {"expression": "2*3"}


def test_an_invented_tool_name_is_still_a_written_call_marked_not_offered():
    found = written_tool_calls('{"name": "get_exchange_rate", "arguments": {"currency": "EUR"}}', OFFERED)
    assert found is not None and not found.calls[0].offered
    assert "get_exchange_rate (not an offered tool)" in found.describe()


@pytest.mark.parametrize("text", [
    "The total is 1,380.00 EUR; I used the calculator for 1200 * 1.15.",
    '{"total": "1380.00", "currency": "EUR"}',  # JSON, but an answer object, not a call
    '{"name": "Vendor A", "status": "approved"}',  # a name without arguments
    "",
])
def test_prose_json_answers_and_empty_text_are_not_calls(text):
    assert written_tool_calls(text, OFFERED) is None
