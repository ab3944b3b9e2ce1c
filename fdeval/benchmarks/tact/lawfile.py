"""TACT law files: a set of reference laws h_z (and the judge weight lambda) as versioned JSON.

A law file replaces the paper's printed laws in scoring (`benchmark.laws=<path>`); `fit_laws`
writes one from an annotated corpus. Reading is strict: every problem raises `LawFileError`, one
line naming the file and the field as a dotted path, e.g.

    laws.json: field 'laws.bck.sigma_s': must be > 0, got -0.1

Format (`format_version` 1; times in seconds on the episode clock, t = 0 the decision point):

    {
      "format": "tact-laws",
      "format_version": 1,
      "domain_s": [-2.0, 5.0],                    # must be TACT's T = [-T_a, T_h]
      "judge_weight": 0.3,                        # lambda of the posterior fusion, in [0, 1]
      "laws": {                                   # exactly the six intents
        "ans": {"family": "exgauss", "mu_s": 0.16, "sigma_s": 0.11, "tau_s": 0.24,
                "no_response_mass": 0.05},
        "ref": {"family": "shifted_lognormal", "shift_s": -2.0, "median_s": 1.9,
                "log_sigma": 0.3046, "no_response_mass": 0.40},
        ...
      },
      "provenance": {...}                         # optional, free-form (how the laws were made)
    }

The parameters describe the untruncated family, as for the paper's laws (`laws.ReferenceLaw`):
ex-Gaussian mu, sigma and tau (tau the mean of the exponential part); shifted log-normal shift,
median (shift + exp(m)) and log-scale sigma. f_z is the family restricted to T and renormalised,
so `no_response_mass` is exactly beta_z. A family must put some mass on T (at least 1e-6).

A law set's identity is the SHA-256 of the file's bytes; the paper's laws are identified by the
hash of their own rendering in this format (`paper_law_file_bytes`).
"""

from __future__ import annotations

import hashlib
import json
import math
from pathlib import Path
from typing import Any

from fdeval.errors import FdevalError
from fdeval.files import write_text_atomic

from .laws import (
    DOMAIN_S,
    INTENTS,
    LAW_FILE_FORMAT,
    LAW_FILE_VERSION,
    LawSet,
    ReferenceLaw,
    law_file_bytes,
    law_file_dict,
    law_params,
    paper_law_file_bytes,
    paper_laws,
)

FAMILY_KEYS = {
    "exgauss": ("mu_s", "sigma_s", "tau_s"),
    "shifted_lognormal": ("shift_s", "median_s", "log_sigma"),
}
TOP_KEYS = {
    "format": True,
    "format_version": True,
    "domain_s": True,
    "judge_weight": True,
    "laws": True,
    "provenance": False,
}
MIN_MASS_IN_DOMAIN = 1e-6


class LawFileError(FdevalError):
    """A bad law file: one line naming the file and the field."""

    def __init__(self, path: str | Path, field: str, message: str):
        self.path, self.field = str(path), field
        super().__init__(f"{path}: field {field!r}: {message}")


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


# ---------------------------------------------------------------------------------------------
# Writing


def write_law_file(path: str | Path, d: dict[str, Any]) -> LawSet:
    """Write a law file (after checking it reads back) and return its law set."""
    data = law_file_bytes(d)
    parsed = parse_law_file(data, path)  # never write a file that would not load
    write_text_atomic(Path(path), data.decode("utf-8"))
    return parsed


# ---------------------------------------------------------------------------------------------
# Reading


def resolve_laws(spec: str | Path | None) -> LawSet:
    """`benchmark.laws`: "paper" (or None) for the printed laws, else a law file's path."""
    if spec is None or str(spec) == "paper":
        return paper_laws()
    return read_law_file(Path(spec).expanduser().resolve())


def read_law_file(path: str | Path) -> LawSet:
    p = Path(path).expanduser()
    try:
        data = p.read_bytes()
    except OSError as e:
        raise LawFileError(p, "<file>", f"cannot read: {e.strerror or e}") from None
    return parse_law_file(data, p)


def parse_law_file(data: bytes, path: str | Path) -> LawSet:
    """Validate a law file's bytes strictly and build its `LawSet` (named by `path`)."""

    def fail(field: str, message: str) -> LawFileError:
        return LawFileError(path, field, message)

    try:
        d = json.loads(
            data.decode("utf-8"), parse_constant=lambda c: (_ for _ in ()).throw(ValueError(c))
        )
    except UnicodeDecodeError:
        raise fail("<file>", "not UTF-8 text") from None
    except json.JSONDecodeError as e:
        raise fail("<json>", f"invalid JSON at line {e.lineno} column {e.colno}: {e.msg}") from None
    except ValueError as e:
        raise fail("<json>", f"{e} is not a JSON number") from None
    if not isinstance(d, dict):
        raise fail("<file>", f"expected an object, got {type(d).__name__}")
    for k in d:
        if k not in TOP_KEYS:
            raise fail(k, f"unknown key; valid keys: {', '.join(TOP_KEYS)}")
    for k, required in TOP_KEYS.items():
        if required and k not in d:
            raise fail(k, "missing required field")
    if d["format"] != LAW_FILE_FORMAT:
        raise fail("format", f"expected {LAW_FILE_FORMAT!r}, got {d['format']!r}")
    v = d["format_version"]
    if isinstance(v, bool) or not isinstance(v, int):
        raise fail("format_version", f"expected an integer, got {v!r}")
    if v != LAW_FILE_VERSION:
        raise fail(
            "format_version",
            f"unsupported version {v}; this fdeval reads version {LAW_FILE_VERSION}",
        )
    dom = d["domain_s"]
    if not isinstance(dom, list) or len(dom) != 2 or any(_number(x) is None for x in dom):
        raise fail("domain_s", f"expected [{DOMAIN_S[0]:g}, {DOMAIN_S[1]:g}], got {dom!r}")
    if tuple(float(x) for x in dom) != tuple(DOMAIN_S):
        raise fail(
            "domain_s",
            f"laws on {dom!r} cannot score TACT's domain [{DOMAIN_S[0]:g}, {DOMAIN_S[1]:g}]",
        )
    lam = _number(d["judge_weight"])
    if lam is None or not 0.0 <= lam <= 1.0:
        raise fail("judge_weight", f"expected a number in [0, 1], got {d['judge_weight']!r}")
    if "provenance" in d and not isinstance(d["provenance"], dict):
        raise fail("provenance", f"expected an object, got {type(d['provenance']).__name__}")
    table = d["laws"]
    if not isinstance(table, dict):
        raise fail("laws", f"expected an object with one entry per intent ({', '.join(INTENTS)})")
    for z in table:
        if z not in INTENTS:
            raise fail(f"laws.{z}", f"unknown intent; valid: {', '.join(INTENTS)}")
    laws = []
    for z in INTENTS:
        if z not in table:
            raise fail(f"laws.{z}", "missing (every intent needs a law)")
        laws.append(
            _law(z, table[z], lambda f, m, z=z: fail(f"laws.{z}.{f}" if f else f"laws.{z}", m))
        )
    return LawSet(tuple(laws), lam, str(path), sha256_hex(data))


def _law(z: str, e: Any, fail) -> ReferenceLaw:
    if not isinstance(e, dict):
        raise fail("", f"expected an object, got {type(e).__name__}")
    fam = e.get("family")
    if fam not in FAMILY_KEYS:
        raise fail("family", f"invalid value {fam!r}; expected one of {', '.join(FAMILY_KEYS)}")
    allowed = ("family", *FAMILY_KEYS[fam], "no_response_mass")
    for k in e:
        if k not in allowed:
            raise fail(k, f"unknown key for family {fam}; valid keys: {', '.join(allowed)}")
    vals = {}
    for k in allowed[1:]:
        if k not in e:
            raise fail(k, "missing required field")
        x = _number(e[k])
        if x is None:
            raise fail(k, f"expected a finite number, got {e[k]!r}")
        vals[k] = x
    beta = vals["no_response_mass"]
    if not 0.0 <= beta <= 1.0:
        raise fail("no_response_mass", f"must be in [0, 1], got {beta!r}")
    if fam == "exgauss":
        for k in ("sigma_s", "tau_s"):
            if not vals[k] > 0:
                raise fail(k, f"must be > 0, got {vals[k]!r}")
        law = ReferenceLaw(z, "exgauss", (vals["mu_s"], vals["sigma_s"], vals["tau_s"]), beta)
    else:
        shift, median, s = vals["shift_s"], vals["median_s"], vals["log_sigma"]
        if not shift < DOMAIN_S[1]:
            raise fail(
                "shift_s",
                f"must be below T_h = {DOMAIN_S[1]:g} (the support would miss the domain), got {shift!r}",
            )
        if not median > shift:
            raise fail("median_s", f"must be above shift_s = {shift!r}, got {median!r}")
        if not s > 0:
            raise fail("log_sigma", f"must be > 0, got {s!r}")
        law = ReferenceLaw(z, "shifted_lognormal", (shift, math.log(median - shift), s), beta)
    mass = float(law.base.cdf(DOMAIN_S[1]) - law.base.cdf(DOMAIN_S[0]))
    if not mass >= MIN_MASS_IN_DOMAIN:
        raise fail(
            "",
            f"the {fam} puts {mass:.3g} of its mass on [{DOMAIN_S[0]:g}, {DOMAIN_S[1]:g}] "
            f"(at least {MIN_MASS_IN_DOMAIN:g} needed)",
        )
    return law


def _number(x: Any) -> float | None:
    if isinstance(x, bool) or not isinstance(x, (int, float)) or not math.isfinite(x):
        return None
    return float(x)


__all__ = [
    "LAW_FILE_FORMAT",
    "LAW_FILE_VERSION",
    "LawFileError",
    "law_file_dict",
    "law_params",
    "paper_law_file_bytes",
    "parse_law_file",
    "read_law_file",
    "resolve_laws",
    "sha256_hex",
    "write_law_file",
]
