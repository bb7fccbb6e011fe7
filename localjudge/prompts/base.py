"""The shape every judge prompt takes, so the shared part can be evaluated once."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class PromptParts:
    """A judge prompt split where requests stop sharing text.

    `instructions` and `shared` are the same for every request of a batch (all claims of one
    item); `own` is this request's part and ends where the JSON answer begins.
    """

    instructions: str  # what the judge must do, with worked examples
    shared: str  # per-item data shared by all requests (the context)
    own: str  # per-request data (one claim), ending with the answer cue
    version: str  # prompt version, recorded with every result

    def messages(
        self, own_text: str | None = None, *, shared_text: str | None = None
    ) -> list[dict[str, str]]:
        """Chat messages for models with a chat template (the texts can be replaced)."""
        shared = self.shared if shared_text is None else shared_text
        own = self.own if own_text is None else own_text
        return [
            {"role": "system", "content": self.instructions},
            {"role": "user", "content": shared + own},
        ]
