"""A tiny template grammar for the offline text backend.

Templates are plain text with

* ``{slot}`` -- replaced by ``slots[slot]`` (a slot value may itself contain alternations);
* ``[a|b|c]`` -- one alternative, picked with the conversation's generator; may nest; an empty
  alternative (``[um |]``) makes a word optional;
* inline markers (``<pause: 1.2>``, ``<backchannel: ...>``) passed through untouched.

:func:`expand` fills slots, resolves alternations innermost first, and tidies spacing,
punctuation and capitals. Helpers spell numbers as words (user speech never holds digits).
"""

from __future__ import annotations

import random
import re

_SLOT = re.compile(r"\{(\w+)\}")
_ALT = re.compile(r"\[([^\[\]]*)\]")
_MARKER = re.compile(r"(<[^<>]*>)")

_ONES = (
    "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen "
    "sixteen seventeen eighteen nineteen"
).split()
_TENS = "_ _ twenty thirty forty fifty sixty seventy eighty ninety".split()


def number_words(n: int) -> str:
    """0..9999 in words: 42 -> 'forty two', 1250 -> 'one thousand two hundred fifty'."""
    if not 0 <= n <= 9999:
        raise ValueError(f"number_words supports 0..9999, got {n}")
    if n < 20:
        return _ONES[n]
    if n < 100:
        return _TENS[n // 10] + ("" if n % 10 == 0 else " " + _ONES[n % 10])
    if n < 1000:
        rest = n % 100
        return _ONES[n // 100] + " hundred" + ("" if rest == 0 else " " + number_words(rest))
    rest = n % 1000
    return _ONES[n // 1000] + " thousand" + ("" if rest == 0 else " " + number_words(rest))


def spell_digits(digits: str) -> str:
    """'4150' -> 'four one five oh' style digit-by-digit reading ('zero' kept as 'zero')."""
    return " ".join(_ONES[int(d)] for d in digits)


def article(noun: str) -> str:
    return ("an " if noun[:1].lower() in "aeiou" else "a ") + noun


def pause(rng: random.Random, lo: float = 0.8, hi: float = 1.6) -> str:
    return f"<pause: {rng.uniform(lo, hi):.1f}>"


def fill(template: str, slots: dict[str, object]) -> str:
    def sub(m: re.Match) -> str:
        key = m.group(1)
        if key not in slots:
            raise KeyError(f"template slot {{{key}}} has no value in {template!r}")
        return str(slots[key])

    for _ in range(5):  # slot values may hold slots of their own
        new = _SLOT.sub(sub, template)
        if new == template:
            break
        template = new
    return template


def choose(template: str, rng: random.Random) -> str:
    while True:
        m = _ALT.search(template)
        if m is None:
            return template
        # resolve the first innermost group
        option = rng.choice(m.group(1).split("|"))
        template = template[: m.start()] + option + template[m.end() :]


# tidy()'s rewrites, in order (compiled once: the grammar scans tidy tens of thousands of texts)
_TIDY_PART = tuple(
    (re.compile(a), b)
    for a, b in (
        (r"\s+", " "),
        (r"\s+([,.?!;])", r"\1"),
        (r",(\s*,)+", ","),
        (r"([.?!]),", r"\1"),
        (r",([.?!])", r"\1"),
        (r"([?!])\.", r"\1"),
        (r"\.\.+", "."),
    )
)
_SPACE_PUNCT = re.compile(r"\s+([,.?!;])")
_START = re.compile(r"^(\s*)([a-z])")
_AFTER_STOP = re.compile(r"([.?!]\s+)([a-z])")
_I = re.compile(r"\bi\b")
_I_CONTRACTED = re.compile(r"\bi'(m|ve|d|ll)\b")


def _cap(m: re.Match) -> str:
    return m.group(1) + m.group(2).upper()


def tidy(text: str) -> str:
    """Collapse spaces, fix spacing around punctuation, capitalise sentence starts (outside markers)."""
    parts = _MARKER.split(text)
    out = []
    for part in parts:
        if part.startswith("<") and part.endswith(">"):
            out.append("<" + " ".join(part[1:-1].split()) + ">")
            continue
        for rx, rep in _TIDY_PART:
            part = rx.sub(rep, part)
        out.append(part)
    text = " ".join(p.strip() for p in out if p.strip())
    text = _SPACE_PUNCT.sub(r"\1", text)

    pieces = _MARKER.split(text)
    result = []
    sentence_start = True
    for piece in pieces:
        if piece.startswith("<") and piece.endswith(">"):
            result.append(piece)
            continue
        if sentence_start:
            piece = _START.sub(_cap, piece)
        piece = _AFTER_STOP.sub(_cap, piece)
        piece = _I.sub("I", piece)
        piece = _I_CONTRACTED.sub(r"I'\1", piece)
        stripped = piece.rstrip()
        if stripped:
            sentence_start = stripped[-1] in ".?!"
        result.append(piece)
    return "".join(result).strip()


def expand(template: str, rng: random.Random, **slots: object) -> str:
    return tidy(choose(fill(template, slots), rng))


_YOU = {
    "i": "you",
    "i'm": "you're",
    "i've": "you've",
    "i'd": "you'd",
    "i'll": "you'll",
    "me": "you",
    "my": "your",
    "mine": "yours",
    "myself": "yourself",
    "am": "are",
    "we": "you",
    "we're": "you're",
    "we've": "you've",
    "our": "your",
    "us": "you",
    "ourselves": "yourselves",
}


def second_person(text: str) -> str:
    """Say the user's first-person words back to them ("I haven't seen my sister" -> "you haven't
    seen your sister")."""
    text = re.sub(r"\b([Ii]|[Ww]e) was\b", lambda m: "you were", text)

    def sub(m: re.Match) -> str:
        word = m.group(0)
        rep = _YOU.get(word.lower())
        if rep is None:
            return word
        if word[0] == "I" and (len(word) == 1 or word[1] == "'"):
            return rep  # "I", "I'm": sentence capitals are restored by tidy()
        return rep[0].upper() + rep[1:] if word[0].isupper() else rep

    return re.sub(r"\b[A-Za-z]+(?:'[a-z]+)?\b", sub, text)


def lower_first(text: str) -> str:
    """Lower-case the first letter unless it starts "I", "I'm", a name-like all-caps token."""
    if re.match(r"I\b", text) or len(text) < 2 or not text[0].isupper() or text[1].isupper():
        return text
    return text[0].lower() + text[1:]


def strip_end(text: str) -> str:
    return text.rstrip(" .?!,")


# ------------------------------------------------------------------------------------------------
# Checking templates: every alternative, and the faults a listener hears


def _split_top(body: str) -> list[str]:
    """`a|b[c|d]|e` -> ['a', 'b[c|d]', 'e'] (bars inside nested brackets stay)."""
    out, depth, start = [], 0, 0
    for i, ch in enumerate(body):
        if ch == "[":
            depth += 1
        elif ch == "]":
            depth -= 1
        elif ch == "|" and depth == 0:
            out.append(body[start:i])
            start = i + 1
    out.append(body[start:])
    return out


def _alternatives(template: str):
    i = template.find("[")
    if i < 0:
        yield template
        return
    depth = 0
    for j in range(i, len(template)):
        depth += {"[": 1, "]": -1}.get(template[j], 0)
        if depth == 0:
            break
    else:
        raise ValueError(f"unbalanced [ in template {template!r}")
    head, rest = template[:i], template[j + 1 :]
    tails = list(_alternatives(rest))
    for option in _split_top(template[i + 1 : j]):
        for mid in _alternatives(option):
            for tail in tails:
                yield head + mid + tail


def count_expansions(template: str, **slots: object) -> int:
    """How many texts :func:`expansions` would give (without building them)."""

    def count(t: str) -> int:
        i = t.find("[")
        if i < 0:
            return 1
        depth = 0
        for j in range(i, len(t)):
            depth += {"[": 1, "]": -1}.get(t[j], 0)
            if depth == 0:
                break
        return sum(count(o) for o in _split_top(t[i + 1 : j])) * count(t[j + 1 :])

    return count(fill(template, {k: str(v) for k, v in slots.items()}))


def expansions(template: str, **slots: object):
    """Every text `template` can expand to with these slot values (each alternative of each
    group combined with each of the others), tidied as :func:`expand` tidies them."""
    seen = set()
    for text in _alternatives(fill(template, {k: str(v) for k, v in slots.items()})):
        text = tidy(text)
        if text not in seen:
            seen.add(text)
            yield text


# Spelled-out numbers repeat legitimately ("five five five, one two"): not doubled words.
_NUMBER_WORDS = frozenset(_ONES) | frozenset(_TENS[2:]) | {"oh", "hundred", "thousand"}
_CHECKS: tuple[tuple[re.Pattern, str], ...] = (
    (re.compile(r"[\[\]{}|]"), "template syntax left in the text"),
    (re.compile(r"\s[,.?!;]|[,;]\s*[,.?!;]|[.?!]\s*[,;.]|[?!]\s*[?!]"), "punctuation out of place"),
    (re.compile(r"  "), "double space"),
    (re.compile(r"[.?!]\s+[a-z]"), "sentence starts in lower case"),
    # (a stranded preposition, "the job you apply to.", is fine English; an article or conjunction is not)
    (
        re.compile(r"\b(?:the|a|an|my|your|their|and|or|but)[.!]", re.I),
        "sentence ends on an article or conjunction",
    ),
    (
        re.compile(
            r"\bI (?:is|are|has)\b|(?i:\b(?:you|we|they) (?:is|was|has|am)\b|\b(?:he|she|it) (?:are|am)\b)"
        ),
        "pronoun and verb disagree",
    ),
)


# ("A as in apple" spells the letter; "a one", "a user" begin with a consonant sound)
_A_VOWEL = re.compile(
    r"\b[Aa]\s+(?!(?i:as in\b|one|once|u[bcfgknrst][aeiou]|ur[aeiou]|use|usu|uni|eu|ewe))"
    r"[AEIOUaeiou]"
)
_AN_CONSONANT = re.compile(
    r"\b[Aa]n\s+(?!(?i:hour|honest|honou?r|heir|herb))[B-DF-HJ-NP-TV-Zb-df-hj-np-tv-z]"
)
_TRIM = ",.?!;:"


def _doubled(piece: str) -> list[str]:
    words = piece.split()
    return [
        f"{a} {b}"
        for a, b in zip(words, words[1:])
        if a[-1:] not in _TRIM
        and a.lower() == b.lower().rstrip(_TRIM)
        and a.lower() not in _NUMBER_WORDS
        and any(ch.isalpha() for ch in a)
    ]


def grammar_problems(text: str) -> list[str]:
    """Faults in one piece of written speech (a turn with its markers, or a marker's content):
    template syntax left over, doubled words ("so so"), a/an before the wrong sound, stray or
    doubled punctuation, lower-case sentence starts, a sentence ending on an article or
    conjunction, pronoun-verb disagreement. Empty when none is found. Markers are checked as
    pieces of their own."""
    pieces = [p for p in _MARKER.split(text) if p.strip()]
    out = []
    for piece in pieces:
        if piece.startswith("<") and piece.endswith(">"):
            kind, _, content = piece[1:-1].partition(":")
            if kind.strip() == "pause":
                continue
            piece = content.strip()
        out += [f"doubled word {d!r} in {piece!r}" for d in _doubled(piece)]
        for rx, what in (
            (_A_VOWEL, "'a' before a vowel"),
            (_AN_CONSONANT, "'an' before a consonant"),
        ):
            for m in rx.finditer(piece):
                out.append(f"{what}: {piece[m.start() : m.end() + 12]!r} in {piece!r}")
        for rx, what in _CHECKS:
            m = rx.search(piece)
            if m:
                out.append(f"{what}: {piece[max(0, m.start() - 20) : m.end() + 20]!r}")
    return out
