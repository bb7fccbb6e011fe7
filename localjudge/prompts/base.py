"""The shape every judge prompt takes, so the shared part can be evaluated once."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class ChatQuestion:
    """The same question put the way a chat judge reads it: its own instructions, answered
    in `schema` at `decision_field`, whose values `means` maps to the caller's verdict values.

    Small instruct models answer "does the context support this?" whatever the rules say a
    "yes" means (training/RESULTS.md, session 76), so the hallucination prompt asks them so
    and the caller still reads `{"verdict": "yes"}` as hallucinated.
    """

    instructions: str
    schema: str  # a grammar name under grammars/
    decision_field: str  # the property the judge decides in
    means: dict[str, str]  # the judge's value -> the caller's verdict value


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
    # how a judge with a chat template is asked instead (None: the same way); left out of
    # == and hash (its `means` is a dict), as `version` already names the wording
    chat: ChatQuestion | None = field(default=None, compare=False)

    @property
    def worked_examples(self) -> str:
        """The worked examples in the instructions: what follows the rules (our prompts put
        them after the first blank line); "" for instructions without any."""
        _, blank, examples = self.instructions.partition("\n\n")
        return examples if blank else ""

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
