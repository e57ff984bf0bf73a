"""``kbroker completion bash|zsh|fish``: a completion script generated from the parser tree,
so it never drifts from the real commands and flags.

    source <(kbroker completion bash)        # or zsh
    kbroker completion fish > ~/.config/fish/completions/kbroker.fish
"""

from __future__ import annotations

import argparse



def register(sub, shared) -> None:
    p = sub.add_parser("completion", help="print a shell completion script",
                       examples="source <(kbroker completion bash)\n"
                                "kbroker completion fish > ~/.config/fish/completions/kbroker.fish")
    p.add_argument("shell", choices=["bash", "zsh", "fish"])
    p.set_defaults(run=run, help_parser=p)


def tree(parser: argparse.ArgumentParser, path: str = "") -> dict[str, list[str]]:
    """Command path ("", "topic", "topic create", ...) -> the words that may follow it."""
    words = [s for action in parser._actions for s in action.option_strings if s.startswith("--")]
    result = {path: words}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, child in action.choices.items():
                words.append(name)
                result.update(tree(child, f"{path} {name}".strip()))
    return result


def bash_script(commands: dict[str, list[str]]) -> str:
    from kbroker.cli.commands.connection import X_KEYS

    x_words = " ".join([f"{key}=" for key in X_KEYS] + ["list"])
    entries = "\n".join(f'  ["{path}"]="{" ".join(sorted(set(words)))}"'
                        for path, words in commands.items())
    return f"""# kbroker bash completion (zsh: autoload -U bashcompinit && bashcompinit first)
declare -gA _kbroker_words=(
{entries}
)
_kbroker() {{
  local cur="${{COMP_WORDS[COMP_CWORD]}}" path="" next w i
  if [[ "${{COMP_WORDS[COMP_CWORD-1]}}" == "-X" ]]; then  # rpk's -X keys, KEY= to type on
    COMPREPLY=($(compgen -W "{x_words}" -- "$cur"))
    compopt -o nospace 2>/dev/null
    return
  fi
  for ((i = 1; i < COMP_CWORD; i++)); do
    w="${{COMP_WORDS[i]}}"
    next="${{path:+$path }}$w"
    [[ -n "${{_kbroker_words[$next]+x}}" ]] && path="$next"
  done
  COMPREPLY=($(compgen -W "${{_kbroker_words[$path]}}" -- "$cur"))
}}
complete -F _kbroker kbroker
"""


def zsh_script(commands: dict[str, list[str]]) -> str:
    return "autoload -U +X bashcompinit && bashcompinit\n" + bash_script(commands)


def fish_script(commands: dict[str, list[str]]) -> str:
    lines = ["# kbroker fish completion", "complete -c kbroker -f"]
    for path, words in commands.items():
        subcommands = [w for w in words if not w.startswith("-")]
        flags = [w[2:] for w in words if w.startswith("--")]
        if path:
            parts = path.split()
            condition = " and ".join(f"__fish_seen_subcommand_from {p}" for p in parts)
        else:
            condition = "__fish_use_subcommand"
        if subcommands:
            lines.append(f"complete -c kbroker -n '{condition}' -a '{' '.join(subcommands)}'")
        for flag in flags:
            lines.append(f"complete -c kbroker -n '{condition}' -l {flag}")
    return "\n".join(lines) + "\n"


def run(args) -> int:
    from kbroker.cli.commands import build_parser

    commands = tree(build_parser())
    print({"bash": bash_script, "zsh": zsh_script, "fish": fish_script}[args.shell](commands), end="")
    return 0
