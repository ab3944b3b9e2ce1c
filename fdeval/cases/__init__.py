"""Test cases on disk: the JSON manifest format, strict loading and atomic writing.

See ``docs/cases.md`` for the format.
"""

from fdeval.cases.schema import (
    AUDIO_DURATION_TOLERANCE_S,
    MAX_ID_LEN,
    SCHEMA_VERSION,
    CaseRecord,
    case_files,
    case_from_dict,
    case_to_dict,
    load_case,
    load_cases,
    write_case,
)

__all__ = [
    "AUDIO_DURATION_TOLERANCE_S",
    "MAX_ID_LEN",
    "SCHEMA_VERSION",
    "CaseRecord",
    "case_files",
    "case_from_dict",
    "case_to_dict",
    "load_case",
    "load_cases",
    "write_case",
]
