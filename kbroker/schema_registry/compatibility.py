"""Compatibility levels, composed as Confluent's ``CompatibilityChecker``.

A format answers one question, ``new.is_backward_compatible(old)`` (data written with ``old`` is
readable with ``new``). BACKWARD asks it of the new schema against the previous ones, FORWARD the
reverse, FULL both. The plain levels check against the latest version only; the ``_TRANSITIVE``
ones against every version (not soft-deleted) of the subject. NONE checks nothing.
"""

from __future__ import annotations

LEVELS = ("NONE", "BACKWARD", "BACKWARD_TRANSITIVE", "FORWARD", "FORWARD_TRANSITIVE", "FULL",
          "FULL_TRANSITIVE")


def check(level: str, new, previous: list[tuple[int, object]]) -> list[str]:
    """The incompatibilities of ``new`` under ``level``; ``previous`` is [(version, parsed)]
    ascending. Each one carries Confluent's trailing details (old version, old schema, level)."""
    if level == "NONE" or not previous:
        return []
    against = previous if level.endswith("_TRANSITIVE") else previous[-1:]
    base = level.removesuffix("_TRANSITIVE")
    messages: list[str] = []
    for version, old in reversed(against):
        found: list[str] = []
        if base in ("BACKWARD", "FULL"):
            found += new.is_backward_compatible(old)
        if base in ("FORWARD", "FULL"):
            found += old.is_backward_compatible(new)
        if found:
            messages += found
            messages += [f"{{oldSchemaVersion: {version}}}",
                         f"{{oldSchema: '{old.canonical()}'}}",
                         f"{{compatibility: '{level}'}}"]
            break  # Confluent reports the first version that fails
    return messages
