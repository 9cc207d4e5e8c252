"""The late policy of a course: a deadline per task, a penalty per day or hour late, a cap and a
grace period, read from a TOML file (`grader deadlines DIR policy.toml`) and kept in the
gradebook. A file with a typo is refused with the line that names what is wrong, never half
applied.

    [deadlines]                     # task name or number = its deadline, with its UTC offset
    "01" = 2026-10-05T23:59:00+08:00
    "02" = 2026-10-19T23:59:00+08:00

    [late]
    penalty_percent = 10            # of the task's points, per started day (or hour) late
    per = "day"                     # "day" or "hour"
    cap_percent = 50                # never more than this
    grace_minutes = 15              # this late costs nothing (then lateness counts from the deadline)
"""
from __future__ import annotations

import difflib
import math
import tomllib
from dataclasses import dataclass
from datetime import datetime, timedelta

from grader.course import Course

_NUMBER = (int, float)
_LATE_KEYS: dict[str, type | tuple[type, ...]] = {"penalty_percent": _NUMBER, "per": str, "cap_percent": _NUMBER,
                                                  "grace_minutes": _NUMBER}
_UNITS = {"day": timedelta(days=1), "hour": timedelta(hours=1)}


class PolicyError(ValueError):
    """A policy file that cannot be applied as written: the message names the key."""


@dataclass(frozen=True)
class Policy:
    deadlines: dict[str, datetime]          # task name -> deadline (aware)
    penalty_percent: float = 0.0
    per: str = "day"
    cap_percent: float = 100.0
    grace: timedelta = timedelta(0)

    def penalty_percent_for(self, late_by: timedelta) -> float:
        """The share of a task's points lost for handing it in `late_by` after its deadline."""
        if late_by <= self.grace:
            return 0.0
        started = math.ceil(late_by / _UNITS[self.per])
        return min(self.cap_percent, started * self.penalty_percent)


def parse(text: str, course: Course) -> Policy:
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise PolicyError(f"not valid TOML: {exc}") from None
    _only(data, {"deadlines", "late"}, "the file")
    deadlines = {}
    for key, value in dict(data.get("deadlines", {})).items():
        try:
            task = course.task_named(str(key))
        except KeyError as exc:
            raise PolicyError(f"[deadlines] {exc.args[0]}") from None
        if not isinstance(value, datetime) or value.tzinfo is None:
            raise PolicyError(f"[deadlines] {key!r}: give a date and time with its UTC offset, "
                              f"e.g. 2026-10-05T23:59:00+08:00 (got {value!r})")
        deadlines[task.name] = value
    late = dict(data.get("late", {}))
    _only(late, set(_LATE_KEYS), "[late]")
    for key, kinds in _LATE_KEYS.items():
        if key in late and (not isinstance(late[key], kinds) or isinstance(late[key], bool)):
            raise PolicyError(f"[late] {key} = {late[key]!r}: expected a {'text' if kinds is str else 'number'}")
    if late.get("per", "day") not in _UNITS:
        raise PolicyError(f"[late] per = {late['per']!r}: expected \"day\" or \"hour\"")
    for key in ("penalty_percent", "cap_percent"):
        if not 0 <= late.get(key, 0) <= 100:
            raise PolicyError(f"[late] {key} = {late[key]!r}: expected a percentage from 0 to 100")
    if late.get("grace_minutes", 0) < 0:
        raise PolicyError(f"[late] grace_minutes = {late['grace_minutes']!r}: expected 0 or more")
    return Policy(deadlines, float(late.get("penalty_percent", 0)), late.get("per", "day"),
                  float(late.get("cap_percent", 100)), timedelta(minutes=late.get("grace_minutes", 0)))


def _only(table: dict, known: set[str], where: str) -> None:
    for key in table:
        if key not in known:
            close = difflib.get_close_matches(key, known, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else f" (known: {', '.join(sorted(known))})"
            raise PolicyError(f"{where}: unknown key {key!r}{hint}")
