"""The closest valid name for a misspelt flag, setting or subcommand: one line a user can act on.

Outside ``kbroker.config`` so that the CLI's parser can use it without loading the config
package (its tables cost every command ~25 ms)."""

from __future__ import annotations

from typing import Iterable


def closest(name: str, candidates: Iterable[str]) -> str | None:
    import difflib  # imported when a name is wrong: ~25 ms of every start-up otherwise
    matches = difflib.get_close_matches(name, list(candidates), n=1, cutoff=0.6)
    return matches[0] if matches else None


def did_you_mean(name: str, candidates: Iterable[str]) -> str:
    """`` (did you mean 'x'?)`` or the empty string, to append to an error line."""
    match = closest(name, candidates)
    return f" (did you mean '{match}'?)" if match else ""
