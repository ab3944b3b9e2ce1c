"""User-facing errors: one line, naming the file, case and field; the CLI prints them without a traceback."""

from __future__ import annotations


# Exit statuses of `python -m fdeval.launch` besides 0 (README, "Exit status").
EXIT_STOPPED = 2  # a user error, or a step that stopped (e.g. cases its run step could not record)
EXIT_NOT_SCORED = (
    3  # every step finished, but some sessions are invalid or failed: not in the scores
)


class FdevalError(Exception):
    """An error caused by user input or configuration (printed as one line, exit code 2)."""

    exit_code = EXIT_STOPPED


class SessionsNotScored(FdevalError):
    """A launch that did all its work, except that some sessions could not be used (invalid or
    failed): its last line counts them, and the exit status says so (3, not 0)."""

    exit_code = EXIT_NOT_SCORED


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
