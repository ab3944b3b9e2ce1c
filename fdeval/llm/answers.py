"""Reading an LLM's answer that must be one JSON object (a judge's, a role's): shared by every
benchmark that asks for one, so each reads fences and stray text the same way."""

from __future__ import annotations

import json
import re

# one ```json (or bare ```) fence around the whole answer
_FENCE = re.compile(r"^```(?:json)?[ \t]*\n(.*?)\n?```$", re.DOTALL | re.IGNORECASE)


def parse_json_object(text: str) -> dict:
    """The JSON object that is the whole answer (bare, or in one ```json fence, nothing around
    it). Raises ValueError saying what is wrong, in words a re-ask can pass on."""
    body = text.strip()
    m = _FENCE.match(body)
    if m:
        body = m.group(1).strip()
    if not body.startswith("{"):
        raise ValueError("the answer must be one JSON object and nothing else")
    try:
        value = json.loads(body)
    except ValueError as e:
        raise ValueError(f"the answer is not valid JSON ({e})") from None
    if not isinstance(value, dict):
        raise ValueError("the answer must be a JSON object")
    return value
