"""A step's output read as the GitHub Actions runner reads it (`ActionCommandManager` and
`ActionCommand` of actions/runner): a line that starts, after leading spaces, with `::name`
(a command the runner knows) is a command, and so is a line holding `##[name]` anywhere (the
legacy form); between `::stop-commands::TOKEN` and a command named TOKEN nothing but that
command is."""
import re

RUNNER_COMMANDS = {"stop-commands", "error", "warning", "notice", "debug", "group", "endgroup", "add-mask",
                   "set-output", "set-env", "add-path", "save-state", "echo", "add-matcher", "remove-matcher"}


def runner_commands(output: str) -> list[tuple[str, str]]:
    """(command, line) for each line the Actions runner would run as a workflow command; the
    line that resumes commands after a stop is ("resume", line)."""
    registered, stop_token, found = set(RUNNER_COMMANDS), None, []
    for line in output.splitlines():
        name, data = _parsed(line, registered)
        if name is None:
            continue
        if stop_token is not None:
            if name == stop_token:
                registered.discard(stop_token)
                stop_token = None
                found.append(("resume", line))
            continue
        if name == "stop-commands":
            stop_token = data.lower()
            registered.add(stop_token)
        found.append((name, line))
    return found


def _parsed(line: str, registered: set[str]) -> tuple[str | None, str]:
    """The command a line holds (lower case, as the runner compares them) and its data."""
    stripped = line.lstrip()
    end = stripped.find("::", 2) if stripped.startswith("::") else -1
    if end > 0:
        name = stripped[2:end].split(" ")[0].lower()
        if name in registered:
            return name, stripped[end + 2:]
    legacy = re.search(r"##\[([^\]]*)\]", line)
    if legacy and legacy.group(1).split(" ")[0].lower() in registered:
        return legacy.group(1).split(" ")[0].lower(), line[legacy.end():]
    return None, ""


class Stream:
    """What `github.publish` writes, kept as text."""

    def __init__(self):
        self.text = ""

    def write(self, text):
        self.text += text

    def flush(self):
        pass
