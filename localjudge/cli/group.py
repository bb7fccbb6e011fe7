"""The `localjudge` click group: library errors become one line and exit code 1."""

from __future__ import annotations

import click

from localjudge.errors import LocalJudgeError


class Group(click.Group):
    """Turns library errors into one line and exit code 1, never a traceback."""

    def invoke(self, ctx: click.Context):
        try:
            return super().invoke(ctx)
        except LocalJudgeError as error:
            raise click.ClickException(str(error)) from None


@click.group(cls=Group)
@click.version_option(package_name="localjudge")
def cli() -> None:
    """Offline LLM-as-judge: local GGUF judges, grammar-constrained verdicts, batched."""
