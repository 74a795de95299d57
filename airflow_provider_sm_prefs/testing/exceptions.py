"""Errors of the offline SageMaker. A leaf: imports nothing of the package, so every layer can raise them.

:class:`ScenarioError` is a user's scenario (file, dict or name) being invalid.
"""

from __future__ import annotations

__all__ = ["ScenarioError"]


class ScenarioError(ValueError):
    """A scenario file, dict or name is invalid; the message names the offending key."""
