"""Whether an operator argument is known only at run time (Jinja markup or an XComArg such as ``task.output``).

Such arguments are checked after rendering, in ``execute``; literal ones already when the DAG is parsed.
"""

from __future__ import annotations

import marshal
from collections.abc import Mapping
from typing import Any

from airflow.sdk.definitions.xcom_arg import XComArg

__all__ = ["has_template"]


def has_template(value: Any) -> bool:
    """Whether ``value`` or anything nested in it (dict keys and values, list and tuple items) is a string
    with Jinja markup or an XComArg."""
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
    if isinstance(value, XComArg):
        return True
    if isinstance(value, Mapping):
        return any(_walk_for_template(k) or _walk_for_template(v) for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return any(_walk_for_template(v) for v in value)
    return False
