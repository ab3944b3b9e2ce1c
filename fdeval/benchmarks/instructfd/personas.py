"""Personas for generated conversations: the shipped pool, persona files, and the condenser.

The shipped pool (``fdeval/data/instructfd_personas.jsonl``, 80 people written for fdeval) has one
JSON object per line with the keys ``id, name, pronoun, age_band, occupation, city, hobby,
situation``.

A persona file (``benchmark.persona_file=PATH``) is JSONL (``.jsonl``/``.json``, one object per
line) or CSV (``.csv``, header row) in either that shape or the shape of Nemotron-Personas-USA.
Columns read, all optional unless said otherwise (others are ignored):

``id`` or ``uuid``
    a row id (default: ``row<line>``)
``name``, or ``first_name`` + ``last_name``, or ``persona``
    the person's name (required in one of these forms); from ``persona`` it is the leading
    capitalised words before " is ", "," or " who" ("Mary Alberti is a ..." -> Mary Alberti)
``pronoun`` (she / he / they) or ``sex`` (female / male / other)
    default: they
``age_band`` (e.g. "thirties") or ``age`` (a whole number 18..110)
``occupation``, ``city``, ``hobby`` or ``hobbies_and_interests_list`` (first item) or
``hobbies_and_interests``, ``situation`` (a verb phrase, "is saving up for a house")
``persona`` (or ``professional_persona``)
    free-text profile, given to the LLM condenser as is

Values are cleaned (underscores to spaces, whitespace collapsed); an attribute whose value is
not plain words (digits, symbols) is left unused rather than spoken. A malformed row raises
:class:`PersonaFileError`, one line naming the file, the line and the field. At most
:data:`MAX_ROWS` rows are read.

The **condenser** fuses ONE persona attribute with the scenario into a single grounding sentence
(:func:`condense`, offline template) -- the LLM backend has its own prompt for this. The offline
backend grounds a conversation only in a detail that fits its topic (:func:`fits`: the detail and
the topic share a domain tag of :data:`TAG_WORDS`), else in the name alone.
"""

from __future__ import annotations

import ast
import csv
import hashlib
import io
import json
import random
import re
from dataclasses import dataclass
from pathlib import Path

from fdeval.errors import FdevalError

DATA_DIR = Path(__file__).resolve().parents[2] / "data"
POOL_PATH = DATA_DIR / "instructfd_personas.jsonl"
MAX_ROWS = 20000
PRONOUNS = ("she", "he", "they")
ATTRIBUTES = ("name", "occupation", "city", "age_band", "hobby", "situation")

_PLAIN = re.compile(r"^[A-Za-z][A-Za-z '\-.,]*$")
_AGE_BANDS = (
    (20, "late teens"),
    (30, "twenties"),
    (40, "thirties"),
    (50, "forties"),
    (60, "fifties"),
    (70, "sixties"),
    (80, "seventies"),
    (200, "eighties"),
)


class PersonaFileError(FdevalError):
    """A persona file row that cannot be read: one line naming the file, the line and the field."""

    def __init__(self, path: str | Path, line: int, field: str, message: str):
        self.path, self.line, self.field = str(path), line, field
        super().__init__(f"{path}: line {line}: field {field!r}: {message}")


@dataclass(frozen=True)
class Persona:
    pid: str
    name: str
    pronoun: str = "they"
    age_band: str | None = None
    occupation: str | None = None
    city: str | None = None
    hobby: str | None = None
    situation: str | None = None
    profile: str = ""  # free text for the LLM condenser

    @property
    def first_name(self) -> str:
        return self.name.split()[0]

    @property
    def possessive(self) -> str:
        return {"she": "her", "he": "his"}.get(self.pronoun, "their")

    def available(self) -> tuple[str, ...]:
        """The attributes this persona has (name always)."""
        return tuple(a for a in ATTRIBUTES if getattr(self, a))

    def describe(self) -> str:
        """A short profile text (for prompts): the free-text profile or the fields."""
        if self.profile:
            return self.profile
        bits = [self.name]
        if self.age_band:
            bits.append(f"in {self.possessive} {self.age_band}")
        if self.occupation:
            bits.append(f"works as {_article(self.occupation)}")
        if self.city:
            bits.append(f"lives in {self.city}")
        if self.hobby:
            bits.append(f"enjoys {self.hobby}")
        if self.situation:
            bits.append(self.situation)
        return ", ".join(bits) + "."

    def to_dict(self) -> dict:
        return {k: v for k, v in self.__dict__.items() if v not in (None, "")}


def _article(noun: str) -> str:
    return ("an " if noun[:1].lower() in "aeiou" else "a ") + noun


# ------------------------------------------------------------------------------------------------
# Reading


def _clean(value: object) -> str | None:
    if value is None:
        return None
    text = re.sub(r"\s+", " ", str(value).replace("_", " ")).strip()
    return text or None


def _plain(value: str | None) -> str | None:
    """`value` if it is plain words that can be spoken as they are, else None."""
    if value and _PLAIN.match(value) and len(value) <= 80:
        return value
    return None


def _name_from_profile(text: str) -> str | None:
    m = re.match(
        r"^\s*((?:[A-Z][a-zA-Z'\-]+)(?:\s+[A-Z][a-zA-Z'\-]+){0,3})(?=\s+is\b|\s*,|\s+who\b|\s+has\b)",
        text,
    )
    return m.group(1) if m else None


def _first_hobby(row: dict, path: Path, line: int) -> str | None:
    raw = row.get("hobby") or row.get("hobbies_and_interests_list")
    if raw is not None and not isinstance(raw, (str, list)):
        raise PersonaFileError(
            path, line, "hobby", f"expected text or a list, got {type(raw).__name__}"
        )
    if isinstance(raw, str) and raw.strip().startswith("["):
        try:
            raw = ast.literal_eval(raw)
        except (ValueError, SyntaxError):
            raw = raw.strip("[]").split(",")
    if isinstance(raw, list):
        raw = next((str(x) for x in raw if str(x).strip()), None)
    if raw is None and row.get("hobbies_and_interests"):
        return None  # a narrative, not a short hobby
    h = _clean(raw)
    return _plain(h.strip(" '\"").lower()) if h else None


def persona_from_row(row: object, path: Path, line: int) -> Persona:
    """One persona from a parsed row; raises PersonaFileError naming the bad field."""
    if not isinstance(row, dict):
        raise PersonaFileError(
            path, line, "<row>", f"expected an object with named fields, got {type(row).__name__}"
        )
    for key in (
        "name",
        "first_name",
        "last_name",
        "persona",
        "occupation",
        "city",
        "situation",
        "pronoun",
        "sex",
        "age_band",
        "id",
        "uuid",
        "professional_persona",
    ):
        v = row.get(key)
        if v is not None and not isinstance(v, str):
            raise PersonaFileError(path, line, key, f"expected text, got {type(v).__name__} {v!r}")
    profile = _clean(row.get("persona")) or _clean(row.get("professional_persona")) or ""
    name = _clean(row.get("name"))
    if not name and (row.get("first_name") or row.get("last_name")):
        name = " ".join(
            x for x in (_clean(row.get("first_name")), _clean(row.get("last_name"))) if x
        )
    if not name and profile:
        name = _name_from_profile(profile)
    if not name:
        raise PersonaFileError(
            path,
            line,
            "name",
            "no name: give 'name', 'first_name'/'last_name', or a 'persona' "
            "text that starts with the person's name",
        )
    if not _plain(name):
        raise PersonaFileError(path, line, "name", f"not a plain name: {name!r}")
    pronoun = _clean(row.get("pronoun"))
    if pronoun is not None:
        pronoun = pronoun.lower()
        if pronoun not in PRONOUNS:
            raise PersonaFileError(
                path, line, "pronoun", f"expected one of {list(PRONOUNS)}, got {pronoun!r}"
            )
    else:
        sex = (_clean(row.get("sex")) or "").lower()
        pronoun = {
            "female": "she",
            "f": "she",
            "woman": "she",
            "male": "he",
            "m": "he",
            "man": "he",
        }.get(sex, "they")
    age_band = _plain(_clean(row.get("age_band")))
    age = row.get("age")
    if age is not None and age != "":
        if isinstance(age, int) and not isinstance(age, bool):
            n = age
        elif isinstance(age, float) and age.is_integer():
            n = int(age)
        elif isinstance(age, str) and age.strip().isdigit():
            n = int(age.strip())
        else:
            raise PersonaFileError(
                path, line, "age", f"expected a whole number of years, got {age!r}"
            )
        if not 18 <= n <= 110:
            raise PersonaFileError(path, line, "age", f"expected 18..110, got {n}")
        age_band = age_band or next(band for limit, band in _AGE_BANDS if n < limit)
    pid = _clean(row.get("id")) or _clean(row.get("uuid")) or f"row{line}"
    return Persona(
        pid=pid,
        name=name,
        pronoun=pronoun,
        age_band=age_band,
        occupation=_plain(_clean(row.get("occupation"))),
        city=_plain(_clean(row.get("city"))),
        hobby=_first_hobby(row, path, line),
        situation=_plain(_clean(row.get("situation"))),
        profile=profile,
    )


def _rows(path: Path):
    """(line number, row) pairs of a JSONL or CSV file."""
    suffix = path.suffix.lower()
    text = path.read_text(encoding="utf-8-sig")
    if suffix == ".csv":
        reader = csv.DictReader(io.StringIO(text, newline=""))
        if not reader.fieldnames:
            raise PersonaFileError(path, 1, "<header>", "empty CSV: expected a header row")
        for row in reader:
            yield (
                reader.line_num,
                {k: (v if v != "" else None) for k, v in row.items() if k is not None},
            )
        return
    if suffix not in (".jsonl", ".json", ".ndjson"):
        raise PersonaFileError(
            path, 0, "<file>", f"unknown file type {suffix!r}; expected .jsonl or .csv"
        )
    for i, raw in enumerate(text.splitlines(), start=1):
        if not raw.strip():
            continue
        try:
            yield i, json.loads(raw)
        except json.JSONDecodeError as e:
            raise PersonaFileError(
                path, i, "<row>", f"not valid JSON ({e.msg} at column {e.colno})"
            ) from None


def load_personas(path: str | Path | None = None) -> tuple[Persona, ...]:
    """The personas of `path` (default: the shipped pool), in file order."""
    p = Path(path).expanduser() if path else POOL_PATH
    if not p.is_file():
        raise PersonaFileError(p, 0, "<file>", "no such file")
    out: list[Persona] = []
    seen: dict[str, int] = {}
    for line, row in _rows(p):
        persona = persona_from_row(row, p, line)
        if persona.pid in seen:
            raise PersonaFileError(
                p, line, "id", f"duplicate id {persona.pid!r} (first on line {seen[persona.pid]})"
            )
        seen[persona.pid] = line
        out.append(persona)
        if len(out) >= MAX_ROWS:
            break
    if not out:
        raise PersonaFileError(p, 0, "<file>", "no personas in the file")
    return tuple(out)


def file_digest(path: str | Path | None) -> str:
    """A short content hash of a persona file (the shipped pool for None)."""
    p = Path(path).expanduser() if path else POOL_PATH
    return hashlib.sha256(p.read_bytes()).hexdigest()[:10]


# ------------------------------------------------------------------------------------------------
# Speaking about oneself

_FIRST_PERSON_VERBS = {
    "is": "I'm",
    "has": "I have",
    "works": "I work",
    "lives": "I live",
    "volunteers": "I volunteer",
    "coaches": "I coach",
    "babysits": "I babysit",
    "moved": "I moved",
    "just": "I just",
    "recently": "I recently",
    "barely": "I barely",
    "cares": "I care",
    "runs": "I run",
    "teaches": "I teach",
}
_OWN = {
    "his": "my",
    "her": "my",
    "their": "my",
    "himself": "myself",
    "herself": "myself",
    "themselves": "myself",
}


def situation_first_person(persona: Persona) -> str | None:
    """The persona's situation said by themself ("is saving up for a house" -> "I'm saving up for a
    house"), or None when it cannot be turned around safely."""
    if not persona.situation:
        return None
    words = persona.situation.split()
    head = _FIRST_PERSON_VERBS.get(words[0].lower())
    if head is None:
        return None
    rest = [_OWN.get(w.lower(), w) for w in words[1:]]
    return " ".join([head, *rest])


# ------------------------------------------------------------------------------------------------
# The condenser (offline)


# Topic fit. A persona detail is worth saying only when it bears on what the user asks about
# ("I'm a big fan of opera. How do I make cookies?" is the defect this prevents). Both sides are
# reduced to coarse domain tags by keyword: a detail fits a topic when they share a tag. Age and
# home town carry the tags "age" and "place", which a topic has when age or place changes the
# answer (fitness, retirement; gardening, storms, addresses).
TAG_WORDS: dict[str, tuple[str, ...]] = {
    "food": (
        "bak*",
        "bread",
        "cook*",
        "chef",
        "kitchen",
        "restaurant",
        "barista",
        "coffee",
        "espresso",
        "brew*",
        "cider",
        "pierogi",
        "barbecue",
        "pastry",
        "food",
        "recipe",
        "meal",
        "sourdough",
        "pasta",
        "canning",
        "syrup",
        "cast iron",
        "pan",
        "diet",
        "grocer*",
        "caffeine",
        "cookie",
        "gluten",
    ),
    "garden": (
        "garden*",
        "bonsai",
        "plant",
        "herb",
        "tomato*",
        "pepper",
        "compost*",
        "landscap*",
        "farm*",
        "seed",
        "soil",
        "lawn",
        "tractor",
        "houseplant",
        "vegetable",
    ),
    "fitness": (
        "run",
        "running",
        "runner",
        "marathon",
        "triathlon",
        "five k",
        "ten k",
        "climb",
        "climbing",
        "bouldering",
        "soccer",
        "rugby",
        "basketball",
        "hockey",
        "football",
        "cycling",
        "biking",
        "mountain biking",
        "swim",
        "swimming",
        "yoga",
        "tennis",
        "golf",
        "hik*",
        "kayak*",
        "paddleboard*",
        "skat*",
        "dancing",
        "physical therapist",
        "gym",
        "workout",
        "exercise",
        "sport",
        "coach*",
        "cricket",
        "trail running",
    ),
    "water": (
        "swim",
        "swimming",
        "kayak*",
        "sail*",
        "paddleboard*",
        "fishing",
        "boat",
        "pool",
        "lake",
    ),
    "outdoors": (
        "hik*",
        "fishing",
        "ice fishing",
        "fly fishing",
        "camp*",
        "bird*",
        "kayak*",
        "trail",
        "sail*",
        "cabin",
        "climb",
        "climbing",
        "outdoor*",
        "paddleboard*",
        "mountain*",
        "birdwatching",
    ),
    "diy": (
        "electrician",
        "plumb*",
        "woodwork*",
        "woodcarving",
        "renovat*",
        "construction",
        "hardware",
        "custodian",
        "fixing",
        "repair*",
        "faucet",
        "shelf",
        "shelves",
        "drill*",
        "paint*",
        "restoring",
        "tool",
        "handy",
        "wall",
        "mechanic",
    ),
    "car": (
        "mechanic",
        "driver",
        "taxi",
        "car",
        "tractor",
        "courier",
        "learning to drive",
        "jump start*",
        "classic car",
        "road trip",
    ),
    "money": (
        "accountant",
        "bank",
        "bank teller",
        "saving",
        "savings",
        "budget*",
        "paying off",
        "loan",
        "insurance",
        "real estate",
        "retirement",
        "retiring",
        "tax",
        "taxes",
        "invest*",
        "debt",
        "bill",
        "income",
        "money",
        "business",
        "shop",
        "store",
        "owner",
        "salon",
        "food truck",
        "afford",
        "expense",
        "electricity bill",
        "power bill",
    ),
    "music": (
        "opera",
        "song*",
        "drum*",
        "guitar*",
        "cello",
        "piano",
        "jazz",
        "choir",
        "karaoke",
        "music*",
        "ukulele",
        "album",
        "chord",
    ),
    "crafts": (
        "knit*",
        "quilt*",
        "embroider*",
        "ceramic*",
        "sketch*",
        "calligraphy",
        "mural",
        "woodcarving",
        "seamstress",
        "sew",
        "sewing",
        "craft*",
        "yarn",
        "painting murals",
        "thrift store fashion",
    ),
    "pets": (
        "puppy",
        "puppies",
        "dog",
        "cat",
        "kitten",
        "greyhound",
        "veterinar*",
        "groomer",
        "pet",
    ),
    "kids": (
        "kid",
        "child",
        "children",
        "son",
        "daughter",
        "father",
        "grandfather",
        "grandchildren",
        "toddler",
        "twins",
        "kindergarten",
        "pediatric*",
        "expecting",
        "midwife",
        "newborn",
        "baby",
        "babies",
        "parent",
        "teenage",
        "birthday party",
        "family",
        "school bus driver",
    ),
    "health": (
        "nurse",
        "pharmac*",
        "medical",
        "doctor",
        "pediatric*",
        "therapist",
        "dental",
        "hygienist",
        "surgery",
        "recovering",
        "midwife",
        "hospital",
        "health*",
        "allerg*",
        "injur*",
        "pain",
        "arthritis",
        "panic",
        "stress*",
        "yoga",
        "meditat*",
        "grief",
        "lost his wife",
        "lost her husband",
        "caring for",
        "knee",
        "wheelchair",
        "pacemaker",
    ),
    "sleep": (
        "night shift",
        "night shifts",
        "overnight shifts",
        "rotating night shifts",
        "truck driver",
        "long haul truck driver",
        "medical resident",
        "flight attendant",
        "two jobs",
        "newborn",
        "just became a father",
        "sleep*",
        "insomnia",
        "tired",
        "emergency room nurse",
    ),
    "work": (
        "career",
        "interview",
        "resume",
        "job",
        "hire",
        "exam",
        "certificate",
        "certification",
        "thesis",
        "freelanc*",
        "business",
        "manager",
        "supervisor",
        "team lead",
        "office",
        "works from home",
        "presentation",
        "promotion",
        "boss",
        "college",
        "student",
        "studying",
        "school",
    ),
    "writing": (
        "journal*",
        "poetry",
        "writ*",
        "thesis",
        "cookbook",
        "editor",
        "translator",
        "librar*",
        "novel*",
        "book",
        "genealogy",
        "calligraphy",
        "speech",
    ),
    "tech": (
        "software",
        "software tester",
        "it certificate",
        "data analyst",
        "smartphone",
        "video",
        "video editor",
        "wi-fi",
        "router",
        "speedrunning",
        "computer",
        "laptop",
        "app",
        "internet",
        "podcast",
        "radio",
        "video games",
        "video calls",
        "works from home",
    ),
    "home": (
        "apartment",
        "house",
        "moving",
        "moved",
        "downsizing",
        "renting",
        "works from home",
        "cabin",
        "move",
        "landlord",
        "roommate",
        "clean*",
        "closet",
        "garage",
        "emergency kit",
    ),
    "safety": (
        "firefighter",
        "police",
        "dispatcher",
        "emergency*",
        "storm",
        "security guard",
        "safety",
        "fire",
        "pacemaker",
        "wheelchair",
    ),
    "travel": (
        "travel*",
        "trip",
        "flight attendant",
        "Portugal",
        "vacation",
        "road trip",
        "exchange student",
    ),
    "language": ("Japanese", "Spanish", "French", "translator", "language", "exchange student"),
    # what an age band or a home town is relevant to
    "age": (
        "retirement",
        "retiring",
        "retire",
        "marathon",
        "half marathon",
        "five k",
        "ten k",
        "swim",
        "swimming",
        "in shape",
        "knee",
        "college",
        "career change",
        "sleep*",
        "smartphone",
        "invest*",
    ),
    "place": (
        "address",
        "garden*",
        "balcony",
        "tomato*",
        "storm",
        "weather",
        "moving",
        "move",
        "trip",
        "commute",
        "neighborhood",
        "bird*",
        "camp*",
        "compost*",
        "winter",
        "coast",
        "emergency kit",
    ),
}


def _word_re(word: str) -> str:
    # "bak*": any word starting "bak"; else the word itself or its plural
    if word.endswith("*"):
        return re.escape(word[:-1]) + r"[a-z'-]*"
    return re.escape(word) + r"(?:s|es)?\b"


_TAG_RES = {
    tag: re.compile(r"\b(?:" + "|".join(_word_re(w) for w in words) + ")", re.I)
    for tag, words in TAG_WORDS.items()
}


def tags_of(text: str) -> frozenset[str]:
    """The domain tags whose keywords occur in `text` (word starts, case-insensitive)."""
    return frozenset(tag for tag, rx in _TAG_RES.items() if rx.search(text or ""))


def attribute_tags(persona: Persona, attribute: str) -> frozenset[str]:
    """The tags of one of the persona's details: its keywords; "age" for the age band, "place"
    for the city; none for the name (always fine to say)."""
    if attribute == "age_band":
        return frozenset({"age"}) if persona.age_band else frozenset()
    if attribute == "city":
        return frozenset({"place"}) if persona.city else frozenset()
    if attribute in (
        "occupation",
        "hobby",
        "situation",
    ):  # ("college" makes a topic about age, not a person)
        return tags_of(getattr(persona, attribute) or "") - {"age", "place"}
    return frozenset()


def fits(persona: Persona, attribute: str, topic_tags: frozenset[str] | set[str]) -> bool:
    """True when `attribute` is the name or shares a tag with the topic."""
    return attribute == "name" or bool(attribute_tags(persona, attribute) & set(topic_tags))


def choose_attribute(
    persona: Persona,
    preferred: tuple[str, ...],
    rng: random.Random,
    topic_tags: frozenset[str] | set[str] | None = None,
    exclude: tuple[str, ...] = (),
) -> str:
    """One attribute to ground the scenario in.

    Without `topic_tags`: a random one of the first two preferred ones the persona has, else
    name. With them (the offline backend): only attributes that fit the topic (:func:`fits`),
    the preferred ones first, then the persona's others; name when none fits. Attributes in
    `exclude` are never chosen.
    """

    def sayable(a: str) -> bool:
        return (
            a not in exclude
            and bool(getattr(persona, a))
            and (a != "situation" or bool(situation_first_person(persona)))
        )

    if topic_tags is None:
        have = [a for a in preferred if sayable(a)]
    else:
        order = [*preferred, *(a for a in ATTRIBUTES if a not in preferred and a != "name")]
        have = [a for a in order if a != "name" and sayable(a) and fits(persona, a, topic_tags)]
    if not have:
        return "name"
    return rng.choice(have[:2])


def condense(persona: Persona, attribute: str, gist: str) -> str:
    """One grounding sentence: the persona's name plus ONE attribute, fused with the scenario gist
    (a clause such as "reads out a phone number to the assistant a piece at a time"; ``{they}``,
    ``{them}``, ``{their}``, ``{self}`` and ``{is}`` agree with the persona's pronoun)."""
    pn = persona.pronoun
    words = {
        "{their}": persona.possessive,
        "{self}": {"she": "herself", "he": "himself"}.get(pn, "themself"),
        "{them}": {"she": "her", "he": "him"}.get(pn, "them"),
        "{they}": pn,
        "{is}": "are" if pn == "they" else "is",
    }
    for slot, word in words.items():
        gist = gist.replace(slot, word)
    name = persona.first_name
    if attribute == "occupation":
        who = f"{name}, {_article(persona.occupation)},"
    elif attribute == "city":
        who = f"{name}, who lives in {persona.city},"
    elif attribute == "age_band":
        who = f"{name}, who is in {persona.possessive} {persona.age_band},"
    elif attribute == "hobby":
        who = f"{name}, who is into {persona.hobby},"
    elif attribute == "situation":
        who = f"{name}, who {persona.situation},"
    else:
        who = name
    return f"{who} {gist}."
