"""The instructor's templates (`grader/delivery/templates/`) and the one way to fill them."""
from __future__ import annotations

import re
from pathlib import Path

TEMPLATES = Path(__file__).with_name("templates")


class TemplateError(ValueError):
    """A template out of step with the code that fills it."""


def fill(name: str, **values: str) -> str:
    """The template `name` with each @@KEY@@ replaced by `values[KEY]`; a placeholder left over
    is an error, never text shipped to a learner."""
    text = (TEMPLATES / name).read_text(encoding="utf-8")
    for key, value in values.items():
        text = text.replace(f"@@{key}@@", value)
    left = re.findall(r"@@[A-Z_]+@@", text)
    if left:
        raise TemplateError(f"{name}: placeholders without a value: {', '.join(sorted(set(left)))}")
    return text
