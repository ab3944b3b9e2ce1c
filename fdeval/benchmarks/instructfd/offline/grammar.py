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

_ONES = ("zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen "
         "sixteen seventeen eighteen nineteen").split()
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
        template = template[: m.start()] + option + template[m.end():]


def tidy(text: str) -> str:
    """Collapse spaces, fix spacing around punctuation, capitalise sentence starts (outside markers)."""
    parts = _MARKER.split(text)
    out = []
    for part in parts:
        if part.startswith("<") and part.endswith(">"):
            out.append("<" + " ".join(part[1:-1].split()) + ">")
            continue
        part = re.sub(r"\s+", " ", part)
        part = re.sub(r"\s+([,.?!;])", r"\1", part)
        part = re.sub(r",(\s*,)+", ",", part)
        part = re.sub(r"([.?!]),", r"\1", part)
        part = re.sub(r",([.?!])", r"\1", part)
        part = re.sub(r"([?!])\.", r"\1", part)
        part = re.sub(r"\.\.+", ".", part)
        out.append(part)
    text = " ".join(p.strip() for p in out if p.strip())
    text = re.sub(r"\s+([,.?!;])", r"\1", text)

    def cap(m: re.Match) -> str:
        return m.group(1) + m.group(2).upper()

    pieces = _MARKER.split(text)
    result = []
    sentence_start = True
    for piece in pieces:
        if piece.startswith("<") and piece.endswith(">"):
            result.append(piece)
            continue
        if sentence_start:
            piece = re.sub(r"^(\s*)([a-z])", cap, piece)
        piece = re.sub(r"([.?!]\s+)([a-z])", cap, piece)
        piece = re.sub(r"\bi\b", "I", piece)
        piece = re.sub(r"\bi'(m|ve|d|ll)\b", r"I'\1", piece)
        stripped = piece.rstrip()
        if stripped:
            sentence_start = stripped[-1] in ".?!"
        result.append(piece)
    return "".join(result).strip()


def expand(template: str, rng: random.Random, **slots: object) -> str:
    return tidy(choose(fill(template, slots), rng))


_YOU = {
    "i": "you", "i'm": "you're", "i've": "you've", "i'd": "you'd", "i'll": "you'll", "me": "you", "my": "your",
    "mine": "yours", "myself": "yourself", "am": "are", "we": "you", "we're": "you're", "we've": "you've",
    "our": "your", "us": "you", "ourselves": "yourselves",
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
