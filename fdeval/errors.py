"""User-facing errors: one line, naming the file, case and field; the CLI prints them without a traceback."""

from __future__ import annotations


class FdevalError(Exception):
    """An error caused by user input or configuration (printed as one line, exit code 2)."""


class FileFieldError(FdevalError):
    """A data file that fails validation: the message names the file, the case and the field."""

    def __init__(self, path: str, case_id: str | None, field: str, message: str):
        self.path, self.case_id, self.field, self.message = str(path), case_id, field, message
        where = f"case {case_id!r}" if case_id else "case ?"
        super().__init__(f"{path}: {where}: field {field!r}: {message}")


class CaseError(FileFieldError):
    """A test case file that fails validation."""


class ConfigError(FdevalError):
    """A composed configuration with a bad value."""
