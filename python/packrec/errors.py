"""packrec's exceptions: one class per status code of the C++ library, with its message.

Each also derives from the built-in exception a Python caller would expect (a missing file is a
FileNotFoundError, a record index past the end an IndexError, a bad option a ValueError), so
generic handlers keep working. Where the error is comes as attributes, from the library's status
fields: `record_index` (the record it is about), `path` (the file) and `byte_offset` (in that
file), each None when it does not apply or is not known; and `remedy`, what can be done about it
("overwrite_to_replace", "overwrite_to_restart", "resume_or_overwrite", "resume_once_fixed",
"skip_bad_input", or None), which the message also says in this API's terms.
"""


class Error(Exception):
    """Base of every packrec error."""

    code = "Internal"

    def __init__(self, message, record_index=None, path=None, byte_offset=None):
        super().__init__(message)
        self.message = message
        self.record_index = record_index
        self.path = path
        self.byte_offset = byte_offset
        self.remedy = None

    def __str__(self):
        return f"{self.code}: {self.message}"


class InvalidArgumentError(Error, ValueError):
    code = "Invalid argument"


class NotFoundError(Error, FileNotFoundError):
    code = "Not found"


class AlreadyExistsError(Error, FileExistsError):
    code = "Already exists"


class InvalidInputError(Error, ValueError):
    code = "Invalid input"


class CorruptionError(Error):
    code = "Corruption"


class TruncatedError(Error):
    code = "Truncated"


class NotSupportedError(Error):
    code = "Not supported"


class IOFailureError(Error, OSError):
    code = "I/O error"


class OutOfRangeError(Error, IndexError):
    code = "Out of range"


class InternalError(Error):
    code = "Internal"


# By packrec::StatusCode's stable numbers (include/packrec/status.h).
_BY_CODE = {
    1: InvalidArgumentError,
    2: NotFoundError,
    3: AlreadyExistsError,
    4: InvalidInputError,
    5: CorruptionError,
    6: TruncatedError,
    7: NotSupportedError,
    8: IOFailureError,
    9: OutOfRangeError,
    10: InternalError,
}


def from_status(code, name, message):
    """The exception for a C++ Status (called by the extension)."""
    cls = _BY_CODE.get(code)
    if cls is None:  # a code newer than this file: keep its name
        error = InternalError(message)
        error.code = name
        return error
    return cls(message)
