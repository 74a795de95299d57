"""The operators' arguments as a try reads them: decoded, converted and parsed once per rendering.

Airflow renders the template fields before ``execute`` (and again in every process a deferral resumes
in); each rendering assigns new values to the fields. What the operator derives from a field (the config
decoded from JSON, ``max_pending`` in seconds, the preference list parsed and checked with the request) is
therefore kept with the values it was derived from (:class:`Derived`), and derived again only when
the fields hold other values: a literal list is parsed once at DAG parse time and once after templating.
"""

from __future__ import annotations

import json
import marshal
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from airflow_provider_sm_prefs.domain import exceptions as errors
from airflow_provider_sm_prefs.domain.preferences import InstancePreferenceList
from airflow_provider_sm_prefs.domain.regions import FailoverRegion

__all__ = ["Derived", "RenderedArguments", "decode_config"]

T = TypeVar("T")

_NOTHING: Any = object()


class Derived(Generic[T]):
    """A value derived from the arguments an operator holds, kept while they hold the same values.

    A tree of builtins is compared by its ``marshal`` bytes (equal bytes: equal values of equal types,
    ``1``, ``1.0`` and ``True`` told apart; a snapshot, so a change in place is seen); anything else
    (a timedelta, a custom object) by identity. A rendering in another try or after a resume assigns new
    objects of the same values: nothing is derived again for them.
    """

    __slots__ = ("_keys", "_value")

    def __init__(self) -> None:
        self._keys: tuple[Any, ...] | None = None
        self._value: T | None = None

    def get(self, sources: tuple[Any, ...], derive: Callable[[], T]) -> T:
        """The value derived from ``sources``: kept from an earlier call with the same values, else
        ``derive()`` (whose exception, if any, is raised every time: nothing is kept then)."""
        keys = tuple(_key(source) for source in sources)
        if self._keys is None or len(keys) != len(self._keys) or not all(map(_same, keys, self._keys)):
            value = derive()
            self._keys, self._value = keys, value
        return self._value  # type: ignore[return-value]


def _key(value: Any) -> Any:
    """What :class:`Derived` compares: the ``marshal`` bytes of a tree of builtins, else the object."""
    try:
        # Version 2: no back-references, which version 3 and later write for objects referenced more than
        # once at the moment of the call (equal values would then give different bytes).
        return marshal.dumps(value, 2)
    except ValueError:
        return _Object(value)


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, _Object) or isinstance(b, _Object):
        return isinstance(a, _Object) and isinstance(b, _Object) and a.value is b.value
    return bool(a == b)


@dataclass(frozen=True, eq=False)
class _Object:
    """An argument that is not a tree of builtins, compared by identity (it is held: its id stays)."""

    value: Any


@dataclass(frozen=True)
class RenderedArguments:
    """The rendered arguments of one try, checked: what every step of the try reads.

    :param config: the rendered config (a string of JSON decoded).
    :param request: the Create request built from it (the list in place).
    :param preferences: the list, parsed and checked with the request.
    :param max_pending: ``max_pending`` in seconds (None when not set).
    :param regions: the regions after the task's own, checked against the request.
    """

    config: Any
    request: dict[str, Any]
    preferences: InstancePreferenceList
    max_pending: int | None
    regions: tuple[FailoverRegion, ...] = ()


def decode_config(config: Any) -> Any:
    """The rendered config (a string of JSON is read); anything but a dict is reported by build_request."""
    if isinstance(config, str):
        try:
            return json.loads(config)
        except ValueError:
            raise errors.InvalidInstancePreferencesError(
                ["config: rendered to a string that is not JSON"]
            ) from None
    return config
