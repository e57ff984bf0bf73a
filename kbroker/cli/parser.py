"""``argparse`` with errors in one line that name the closest valid flag or subcommand.

``kbroker topic craete`` prints ``kbroker topic: error: unknown command 'craete' (did you mean
'create'?)`` and exits 2, instead of argparse's usage block.
"""

from __future__ import annotations

import argparse
import re
import sys

from kbroker.suggest import did_you_mean

EXIT_USAGE = 2


class Parser(argparse.ArgumentParser):
    def __init__(self, *args, examples: str | None = None, **kwargs) -> None:
        if examples:
            kwargs["epilog"] = "examples:\n" + "\n".join(
                "  " + line for line in examples.strip("\n").splitlines())
            kwargs.setdefault("formatter_class", argparse.RawDescriptionHelpFormatter)
        kwargs.setdefault("allow_abbrev", False)  # --ready-fil is a typo, not --ready-file
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> None:
        self.exit(EXIT_USAGE, f"{self.prog}: error: {self._explain(message)}\n")

    def _explain(self, message: str) -> str:
        unrecognized = re.match(r"unrecognized arguments: (.*)", message)
        if unrecognized:
            first = unrecognized.group(1).split()[0]
            flag = first.split("=", 1)[0]
            if flag.startswith("-"):
                return f"unknown flag '{flag}'{did_you_mean(flag, self._option_strings())}"
            return f"unexpected argument '{first}'"
        choice = re.match(r"argument (\S+): invalid choice: '([^']*)' \(choose from (.*)\)", message)
        if choice:
            what, given, allowed = choice.groups()
            names = re.findall(r"'([^']*)'", allowed)
            noun = "command" if what.startswith("{") or what in ("command", "COMMAND") else f"value for {what}"
            return f"unknown {noun} '{given}'{did_you_mean(given, names)}; one of: {', '.join(names)}"
        return message

    def _option_strings(self) -> list[str]:
        return [s for action in self._actions for s in action.option_strings]

    def parse_known_args(self, args=None, namespace=None):
        # argparse hands a subcommand's unknown flags up to the top parser, which would suggest
        # among its own flags; the leaf parser that received them reports them instead.
        namespace, extras = super().parse_known_args(args, namespace)
        if extras and not self._has_subcommands():
            self.error(f"unrecognized arguments: {' '.join(extras)}")
        return namespace, extras

    def _has_subcommands(self) -> bool:
        return any(isinstance(a, argparse._SubParsersAction) for a in self._actions)


def fail(message: str, code: int = 1) -> int:
    """Print ``kbroker: <message>`` on one line and return the exit code."""
    print(f"kbroker: {message}", file=sys.stderr)
    return code
