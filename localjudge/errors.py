"""Typed exceptions. Each carries one line a user can act on."""

from __future__ import annotations


class LocalJudgeError(Exception):
    """Base class: a mistake or condition the user can fix, reported as one line."""


class ModelError(LocalJudgeError):
    """A judge model cannot be found, verified or loaded."""


class RegistryError(ModelError):
    """The model registry does not know a name, or an entry is malformed."""


class ChecksumError(ModelError):
    """A model file's sha256 differs from the registry's."""


class PromptTooLongError(LocalJudgeError):
    """A prompt (plus its token budget) does not fit in the judge's context window."""


class SchemaError(LocalJudgeError):
    """A JSON Schema cannot be compiled into a grammar, or a budget cannot close it."""


class GenerationError(LocalJudgeError):
    """A generation request failed; the reason says why."""


class RequestCancelled(GenerationError):
    """The request was cancelled before it finished."""


class VerdictError(LocalJudgeError):
    """A judge reply parsed but did not validate against its schema."""


class ScorerInputError(LocalJudgeError):
    """A scorer run is missing a field or holds a value of the wrong kind."""


class ScorerError(LocalJudgeError):
    """A scorer step failed (a hook raised, the judge could not answer); the reason says why."""


# Errors that the same input will always raise again: resuming does not retry them.
INPUT_ERRORS: tuple[type[Exception], ...] = (ScorerInputError, PromptTooLongError)


def error_kind(error: BaseException) -> str:
    """ "input" for an error the input itself causes (retrying cannot help), "transient" for
    anything else (an engine failure, a cancelled or closed judge, a hook that raised)."""
    return "input" if isinstance(error, INPUT_ERRORS) else "transient"
