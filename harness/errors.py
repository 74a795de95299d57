"""The one error the harness raises."""

from __future__ import annotations


class DeploymentError(RuntimeError):
    """The local deployment did not start, a call to it failed or a wait ran out; the message says where
    to look (a component's log, the API's answer, the states seen last)."""
