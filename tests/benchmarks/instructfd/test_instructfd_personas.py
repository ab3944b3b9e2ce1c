"""Persona pool, persona files (JSONL / CSV, Nemotron-Personas-like) and the offline condenser."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from fdeval.benchmarks.instructfd.personas import (
    POOL_PATH,
    Persona,
    PersonaFileError,
    attribute_tags,
    choose_attribute,
    condense,
    fits,
    load_personas,
    situation_first_person,
    tags_of,
)
from fdeval.errors import ConfigError, FdevalError


def test_shipped_pool() -> None:
    pool = load_personas()
    assert 60 <= len(pool) <= 100
    assert len({p.pid for p in pool}) == len(pool)
    assert len({p.name for p in pool}) == len(pool)
    for p in pool:
        assert p.pronoun in ("she", "he", "they")
        assert p.occupation and p.city and p.age_band and p.hobby and p.situation
        assert not any(ch.isdigit() for k, v in p.to_dict().items() if k != "pid" for ch in str(v))
        assert situation_first_person(p), (
            p.situation
        )  # every situation can be said in the first person
    assert load_personas(POOL_PATH) == pool


def _write_jsonl(path: Path, rows: list) -> Path:
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows))
    return path


def test_nemotron_like_jsonl(tmp_path: Path) -> None:
    f = _write_jsonl(
        tmp_path / "personas.jsonl",
        [
            {
                "uuid": "a1",
                "persona": "Mary Alberti is a front line food service specialist who loves routine.",
                "sex": "Female",
                "age": 42,
                "occupation": "food_service_specialist",
                "city": "Madison",
                "state": "WI",
                "hobbies_and_interests_list": "['Running', 'Indie folk music']",
            },
            {
                "uuid": "b2",
                "first_name": "Tom",
                "last_name": "Reyes",
                "sex": "Male",
                "age": "67",
                "city": "El Paso",
            },
            {"uuid": "c3", "name": "Jo Park", "pronoun": "they", "occupation": "R2 unit tester"},
        ],
    )
    a, b, c = load_personas(f)
    assert (a.pid, a.name, a.pronoun, a.age_band, a.city) == (
        "a1",
        "Mary Alberti",
        "she",
        "forties",
        "Madison",
    )
    assert a.occupation == "food service specialist" and a.hobby == "running"
    assert a.profile.startswith("Mary Alberti is")  # the free text goes to the LLM condenser as is
    assert (b.name, b.pronoun, b.age_band, b.occupation) == ("Tom Reyes", "he", "sixties", None)
    assert c.occupation is None  # not plain words: left unused rather than spoken


def test_csv(tmp_path: Path) -> None:
    f = tmp_path / "people.csv"
    f.write_text(
        "id,name,sex,age,occupation,city,hobby\n"
        "x1,Ana Souza,female,29,nurse,Fresno,salsa dancing\n"
        "x2,Ben Ode,,55,,Reno,\n"
    )
    a, b = load_personas(f)
    assert (a.pid, a.name, a.pronoun, a.age_band, a.hobby) == (
        "x1",
        "Ana Souza",
        "she",
        "twenties",
        "salsa dancing",
    )
    assert (b.pronoun, b.occupation, b.hobby, b.age_band) == ("they", None, None, "fifties")


@pytest.mark.parametrize(
    "row,line,field",
    [
        ('{"name": "Al", "age": "abc"}', 2, "age"),
        ('{"name": "Al", "age": 7}', 2, "age"),
        ('{"occupation": "welder"}', 2, "name"),
        ('{"name": "Al", "pronoun": "xe"}', 2, "pronoun"),
        ('{"name": "Al", "city": 12}', 2, "city"),
        ('{"name": "Al",', 2, "<row>"),
        ('["Al"]', 2, "<row>"),
    ],
)
def test_bad_row_names_file_line_and_field(tmp_path: Path, row: str, line: int, field: str) -> None:
    f = _write_jsonl(tmp_path / "p.jsonl", ['{"name": "Good Row"}', row])
    with pytest.raises(PersonaFileError) as ei:
        load_personas(f)
    msg = str(ei.value)
    assert "\n" not in msg
    assert msg.startswith(f"{f}: line {line}: field {field!r}:"), msg
    assert isinstance(ei.value, FdevalError)


def test_bad_csv_row_and_missing_file(tmp_path: Path) -> None:
    f = tmp_path / "p.csv"
    f.write_text("name,age\nAl,40\nBo,forty\n")
    with pytest.raises(PersonaFileError, match=r"p\.csv: line 3: field 'age'"):
        load_personas(f)
    with pytest.raises(PersonaFileError, match="no such file"):
        load_personas(tmp_path / "nope.jsonl")
    dup = _write_jsonl(
        tmp_path / "d.jsonl", ['{"id": "1", "name": "A B"}', '{"id": "1", "name": "C D"}']
    )
    with pytest.raises(
        PersonaFileError, match=r"line 2: field 'id': duplicate id '1' \(first on line 1\)"
    ):
        load_personas(dup)


def test_benchmark_reports_a_bad_persona_file_as_one_config_line(tmp_path: Path) -> None:
    from fdeval.benchmarks.instructfd.benchmark import InstructFD

    f = _write_jsonl(tmp_path / "p.jsonl", ['{"name": "A B", "age": "old"}'])
    with pytest.raises(ConfigError) as ei:
        InstructFD(size="sample", persona_file=str(f))
    assert str(ei.value).startswith(f"benchmark.persona_file: {f}: line 1: field 'age':")


def test_condenser_uses_one_attribute() -> None:
    p = Persona(
        "p1",
        "Rosa Delgado",
        "she",
        "forties",
        "school librarian",
        "Tucson",
        "restoring old bicycles",
        "just adopted a retired greyhound",
    )
    s = condense(
        p, "occupation", "reads out {topic} to the assistant".replace("{topic}", "a phone number")
    )
    assert s == "Rosa, a school librarian, reads out a phone number to the assistant."
    assert "Tucson" not in s and "forties" not in s
    assert (
        condense(p, "city", "asks {self} a question about {their} plan")
        == "Rosa, who lives in Tucson, asks herself a question about her plan."
    )
    assert condense(p, "name", "tells a story") == "Rosa tells a story."
    rng = random.Random(0)
    assert {choose_attribute(p, ("situation", "occupation", "city"), rng) for _ in range(50)} == {
        "situation",
        "occupation",
    }
    bare = Persona("p2", "Al Bo")
    assert choose_attribute(bare, ("occupation", "city"), rng) == "name"
    assert situation_first_person(p) == "I just adopted a retired greyhound"


def test_topic_tags_come_from_whole_words_and_stems() -> None:
    assert tags_of("baking pierogi") == {"food"} and "music" in tags_of("songwriting")
    assert (
        tags_of("is caring for his elderly mother") & {"car", "kids"} == set()
    )  # no "car" in "caring", "son" in "song"
    assert "car" in tags_of("squeaky car brakes") and "pets" in tags_of("just adopted a rescue cat")
    assert tags_of("") == frozenset()


def test_choose_attribute_with_topic_tags_keeps_only_details_that_fit() -> None:
    p = Persona(
        "p1",
        "Rosa Delgado",
        "she",
        "forties",
        "bakery owner",
        "Tucson",
        "opera",
        "is learning to budget",
    )
    assert attribute_tags(p, "hobby") == {"music"} and attribute_tags(p, "city") == {"place"}
    assert attribute_tags(p, "age_band") == {"age"} and attribute_tags(p, "name") == frozenset()
    rng = random.Random(0)
    cookies = {"food", "kids"}
    # opera never grounds a conversation about cookies; the bakery does
    assert {choose_attribute(p, ("hobby", "occupation"), rng, cookies) for _ in range(40)} == {
        "occupation"
    }
    # the preferred city first, then the persona's other fitting details in order (the bakery owner's job)
    assert {choose_attribute(p, ("hobby", "city"), rng, {"money", "place"}) for _ in range(40)} == {
        "city",
        "occupation",
    }
    assert (
        choose_attribute(p, ("hobby",), rng, {"money"}, exclude=("situation", "occupation"))
        == "name"
    )
    assert choose_attribute(p, ("hobby",), rng, {"birds"}) == "name"  # nothing fits: the name only
    assert fits(p, "name", set()) and not fits(p, "hobby", cookies)
    # occupation, hobby and situation never carry the age/place tags a topic uses for age band and city
    student = Persona("p2", "Al Bo", situation="is starting community college in the fall")
    assert "age" in tags_of(student.situation) and "age" not in attribute_tags(student, "situation")
