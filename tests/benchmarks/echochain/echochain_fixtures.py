"""A small hand-made seed and exchange builder shared by the EchoChain role tests."""

from __future__ import annotations

from fdeval.benchmarks.echochain.classifier import Exchange
from fdeval.benchmarks.echochain.seeds import Seed

SEED = Seed.from_dict(
    {
        "seed_id": "test_dinner",
        "topic": "event planning",
        "subtopic": "dinner party menu",
        "topic_description": "Planning a menu for a small dinner party at home.",
        "persona": "Maya, a busy nurse who hosts friends once a month",
        "task_keywords": ["menu", "dinner"],
        "exchanges": [
            {
                "index": 1,
                "message": "Hey, so I'm having six friends over for dinner on Saturday. "
                "Could you help me plan a simple menu?",
            },
            {
                "index": 2,
                "message": "Okay, that sounds good. What would you serve as the main course?",
                "barge_in_label": "Real-time Thought Process",
                "barge_in": "Hmm, wait, I just remembered that two of them are vegan. Does that change the main?",
                "evidence": ["vegan", "plant-based", "lentil"],
                "stale": ["beef", "chicken"],
                "criteria": [
                    {
                        "criterion_id": "ex2.c1",
                        "text": "Proposes a vegan main",
                        "require_any": ["vegan", "plant-based", "lentil"],
                    },
                    {
                        "criterion_id": "ex2.c2",
                        "text": "Drops the meat main",
                        "forbid": ["beef", "chicken"],
                    },
                    {
                        "criterion_id": "ex2.c3",
                        "text": "Still plans the dinner menu",
                        "require_any": ["menu", "dinner"],
                        "scope": "answer",
                    },
                ],
            },
            {
                "index": 3,
                "message": "Nice. And what about dessert, something easy?",
                "barge_in_label": "Clarification Request",
                "barge_in": "Sorry, does that still work if I only have one hour to cook on the day?",
                "evidence": ["one hour", "no-bake", "quick"],
                "stale": ["overnight"],
                "criteria": [
                    {
                        "criterion_id": "ex3.c1",
                        "text": "Fits the hour",
                        "require_any": ["one hour", "no-bake", "quick"],
                    },
                    {
                        "criterion_id": "ex3.c2",
                        "text": "No overnight dessert",
                        "forbid": ["overnight"],
                    },
                ],
            },
        ],
    },
    "tests",
)


def exchange(
    index: int,
    continuation: str,
    *,
    message: str | None = None,
    before: str = "",
    barge_in: str | None = "use script",
    case_id: str = "case-1",
) -> Exchange:
    """Exchange `index` of SEED as the loop would segment it, with the given assistant text."""
    step = SEED.exchanges[index - 1]
    cut = step.barge_in if barge_in == "use script" else barge_in
    return Exchange(
        case_id,
        index,
        message or step.message,
        before if cut else "",
        cut,
        step.barge_in_label if cut else None,
        continuation,
    )
