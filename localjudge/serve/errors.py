"""`ServeError`: an HTTP error with a JSON body; the status of a library error; checks of
body fields every route shares."""

from typing import Any

from localjudge.errors import LocalJudgeError, error_kind

_FIELDS = ("context", "output", "input", "groundTruth", "requestContext")  # named in errors


class ServeError(Exception):
    """An HTTP error with a JSON body: `{"error": {"type", "message", "field"?}}`."""

    def __init__(self, status: int, kind: str, message: str, field: str | None = None) -> None:
        super().__init__(message)
        self.status, self.kind, self.message, self.field = status, kind, message, field

    def body(self) -> dict[str, Any]:
        error = {"type": self.kind, "message": self.message}
        if self.field is not None:
            error["field"] = self.field
        return {"error": error}


def error_of(error: BaseException) -> ServeError:
    """The HTTP status of a library error: what the caller sent (400) or what we could not
    do (500)."""
    if isinstance(error, ServeError):
        return error
    if isinstance(error, LocalJudgeError) and error_kind(error) == "input":
        message = str(error)
        field = next((f for f in _FIELDS if f in message), None)
        return ServeError(400, "invalid_input", message, field=field)
    if isinstance(error, LocalJudgeError):
        return ServeError(500, "judge_error", str(error))
    return ServeError(500, "internal_error", f"{type(error).__name__}: {error}")


def store_text_of(value: Any) -> bool:
    if not isinstance(value, bool):
        raise ServeError(400, "invalid_input", "storeText must be true or false", field="storeText")
    return value
