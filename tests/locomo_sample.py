"""A tiny LoCoMo-shaped data set with the real file's quirks (several evidence ids in one
string, an id that matches no turn, an image turn, an adversarial question), for the recall
harness tests."""

from __future__ import annotations

from typing import Any

RARE_QUESTION = "What did Alice name her xylophone?"


def _session(prefix: str, lines: list[tuple[str, str]]) -> list[dict[str, str]]:
    return [
        {"speaker": who, "dia_id": f"{prefix}:{i}", "text": text}
        for i, (who, text) in enumerate(lines, start=1)
    ]


def synthetic() -> list[dict[str, Any]]:
    conv_a = {
        "speaker_a": "Alice",
        "speaker_b": "Bob",
        "session_1_date_time": "1:56 pm on 8 May, 2023",
        "session_1": _session(
            "D1",
            [
                ("Alice", "Hi Bob! I finally bought a xylophone and named it Clementine."),
                ("Bob", "Ha, great name. I went hiking in the mountains last weekend."),
                ("Alice", "Which trail did you take?"),
                ("Bob", "The ridge trail near the lake, it was beautiful."),
            ],
        ),
        "session_2_date_time": "7:55 pm on 9 June, 2023",
        "session_2": [
            *_session(
                "D2",
                [
                    ("Alice", "My sister adopted a puppy called Biscuit."),
                    ("Bob", "Lovely! I started learning to bake sourdough bread."),
                    ("Alice", "Is the bread any good yet?"),
                ],
            ),
            {
                "speaker": "Bob",
                "dia_id": "D2:4",
                "text": "Take a look at this loaf.",
                "img_url": ["http://example.invalid/x.jpg"],
                "blip_caption": "a photo of a loaf of bread",
            },
        ],
    }
    conv_b = {
        "speaker_a": "Carol",
        "speaker_b": "Dan",
        "session_1_date_time": "10:00 am on 2 January, 2022",
        "session_1": _session(
            "D1",
            [
                ("Carol", "I am training for a marathon in Berlin."),
                ("Dan", "Impressive! I repaired an old motorcycle this winter."),
                ("Carol", "What model is the motorcycle?"),
            ],
        ),
        "session_2_date_time": "3:30 pm on 20 February, 2022",
        "session_2": _session(
            "D2",
            [
                ("Dan", "I sold the motorcycle and bought a canoe."),
                ("Carol", "I finished the Berlin marathon in four hours."),
            ],
        ),
    }
    qa_a = [
        {"question": RARE_QUESTION, "answer": "Clementine", "evidence": ["D1:1"], "category": 4},
        {
            "question": "Where did Bob go hiking?",
            "answer": "the ridge trail",
            "evidence": ["D1:2", "D1:4"],
            "category": 1,
        },
        {
            "question": "When did Bob start baking bread?",
            "answer": "June 2023",
            "evidence": ["D2:2; D2:4"],  # several ids in one string, as in the real data
            "category": 2,
        },
        {
            "question": "What is the name of the puppy?",
            "answer": "Biscuit",
            "evidence": ["D2:1", "D9:99"],  # an id that matches no turn
            "category": 4,
        },
        {
            "question": "What did Alice's sister name her kitten?",
            "adversarial_answer": "Biscuit",
            "evidence": ["D2:1"],
            "category": 5,
        },
        {"question": "What does Alice think?", "answer": "n/a", "evidence": [], "category": 3},
    ]
    qa_b = [
        {
            "question": "Which city hosted the marathon Carol ran?",
            "answer": "Berlin",
            "evidence": ["D1:1", "D2:2"],
            "category": 1,
        },
        {
            "question": "What did Dan buy after selling the motorcycle?",
            "answer": "a canoe",
            "evidence": ["D2:1"],
            "category": 4,
        },
    ]
    return [
        {"sample_id": "syn-a", "conversation": conv_a, "qa": qa_a},
        {"sample_id": "syn-b", "conversation": conv_b, "qa": qa_b},
    ]
