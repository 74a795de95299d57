"""Whether an operator argument still holds Jinja markup (then it is checked after rendering, not at parse)."""

from __future__ import annotations

import marshal
from collections.abc import Mapping
from typing import Any

__all__ = ["has_template"]


def has_template(value: Any) -> bool:
    """Whether ``value`` or a string nested in it (dict keys and values, list and tuple items) has Jinja markup."""
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
    if isinstance(value, Mapping):
        return any(_walk_for_template(k) or _walk_for_template(v) for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return any(_walk_for_template(v) for v in value)
    return False
