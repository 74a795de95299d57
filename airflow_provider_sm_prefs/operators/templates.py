"""Whether an operator argument is known only at run time: Jinja markup, an XComArg such as
``task.output``, or an argument of a mapped task group (``MappedArgument``, resolved when the task runs).

Such arguments are checked after rendering, in ``execute``; literal ones already when the DAG is parsed.
"""

from __future__ import annotations

import marshal
from collections.abc import Mapping
from typing import Any

# The base of XComArg and MappedArgument: what Airflow resolves when it renders a template field (the same
# path in Airflow 3.0 to 3.3).
from airflow.sdk.definitions._internal.mixins import ResolveMixin

__all__ = ["has_template"]


def has_template(value: Any) -> bool:
    """Whether ``value`` or anything nested in it (dict keys and values, list and tuple items) is a string
    with Jinja markup, an XComArg or a mapped task group's argument."""
    if isinstance(value, (dict, list, tuple)):
        # One pass in C for the common literal case: marshal takes only trees of exact builtin types and
        # writes every string's bytes verbatim, so bytes without markup prove strings without markup.
        try:
            blob = marshal.dumps(value)
        except ValueError:  # some other type in the tree: walk it
            pass
        else:
            if b"{{" not in blob and b"{%" not in blob:
                return False
    return _walk_for_template(value)


def _walk_for_template(value: Any) -> bool:
    if isinstance(value, str):
        return "{{" in value or "{%" in value
    if isinstance(value, ResolveMixin):
        return True
    if isinstance(value, Mapping):
        return any(_walk_for_template(k) or _walk_for_template(v) for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return any(_walk_for_template(v) for v in value)
    return False
