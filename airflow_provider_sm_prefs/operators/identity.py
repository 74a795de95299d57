"""The identity tags of a task's try: read from its context and Airflow's config, at run time.

What the tags are and how they are checked is :mod:`airflow_provider_sm_prefs.domain.identity`; this
module only reads what the domain needs from Airflow: the task instance, ``[sm_prefs] deployment_id``
(else the API server's URL, else the metadata database's, hashed) and ``[sm_prefs] identity_tags``, the
deployment-wide switch. Config is read when a try runs, never when the DAG is parsed.
"""

from __future__ import annotations

from typing import Any

from airflow_provider_sm_prefs.compat import AirflowFailException
from airflow_provider_sm_prefs.domain.exceptions import InvalidInstancePreferencesError
from airflow_provider_sm_prefs.domain.identity import (
    IDENTITY_XCOM_KEY,
    AirflowIdentity,
    default_deployment_id,
    with_identity,
)
from airflow_provider_sm_prefs.operators.task_try import TaskTry

__all__ = ["IdentityTags", "deployment_id", "identity_of", "identity_tags_enabled"]


def identity_tags_enabled(argument: bool) -> bool:
    """Whether a task sends identity tags: its ``identity_tags`` argument and ``[sm_prefs] identity_tags``."""
    if not argument:
        return False
    from airflow.configuration import conf

    return conf.getboolean("sm_prefs", "identity_tags", fallback=True)


def deployment_id() -> str:
    """``[sm_prefs] deployment_id``, else :func:`~.domain.identity.default_deployment_id` of the API
    server's URL (``[api] base_url``, else ``[core] execution_api_server_url``), else of the metadata
    database's URL (``[database] sql_alchemy_conn``)."""
    from airflow.configuration import conf

    given = (conf.get("sm_prefs", "deployment_id", fallback="") or "").strip()
    if given:
        return given
    for section, key in (
        ("api", "base_url"),
        ("core", "execution_api_server_url"),
        ("database", "sql_alchemy_conn"),
    ):
        try:
            source = conf.get(section, key, fallback="") or ""
        except Exception:  # a value from a command or secret that fails here is no identity
            source = ""
        if source.strip():
            return default_deployment_id(source.strip())
    return default_deployment_id(None)


def identity_of(context: Any) -> AirflowIdentity:
    """The identity of the try ``context`` belongs to."""
    ti = context.get("ti")
    map_index = getattr(ti, "map_index", -1)
    try_number = getattr(ti, "try_number", None)
    return AirflowIdentity(
        dag_id=str(getattr(ti, "dag_id", "")),
        task_id=str(getattr(ti, "task_id", "")),
        run_id=str(getattr(ti, "run_id", "")),
        map_index=-1 if map_index is None else int(map_index),
        try_number=try_number if isinstance(try_number, int) and not isinstance(try_number, bool) else None,
        deployment_id=deployment_id(),
    )


class IdentityTags:
    """A task's identity tags: checked before any AWS call, added to each Create, recorded with the job.

    They are set at Create only. A try that reattaches to a running job (or returns a completed one's
    outcome) reports the tags recorded with that job, which name the try that created it.

    :param enabled: the operator's ``identity_tags`` argument (``[sm_prefs] identity_tags`` also applies).
    """

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled

    def of(self, context: Any) -> AirflowIdentity | None:
        """This try's identity, or None when identity tags are off (argument or config)."""
        return identity_of(context) if identity_tags_enabled(self.enabled) else None

    def check(self, context: Any, request: dict[str, Any]) -> None:
        """Raise :class:`InvalidInstancePreferencesError` if Create could not carry the config's tags and ours."""
        with_identity(request.get("Tags"), self.of(context))

    def tagged(self, run: TaskTry, request: dict[str, Any]) -> tuple[dict[str, Any], dict[str, str] | None]:
        """The Create request with this try's identity tags after the config's own, and those tags
        (``AirflowIdentity.as_dict()``; None when off), recorded with the job.

        A stage of acceptance windows is its own job: it carries the try that creates it.
        """
        identity = self.of(run.context)
        try:
            tags = with_identity(request.get("Tags"), identity)
        except InvalidInstancePreferencesError as err:  # the same config renders the same problems
            raise AirflowFailException(str(err)) from err
        request = {k: v for k, v in request.items() if k != "Tags"}
        if tags:
            request["Tags"] = tags
        recorded = identity.as_dict() if identity is not None else None
        run.store.update(identity_tags=recorded)
        self._push(run, recorded)
        return request, recorded

    def push_recorded(self, run: TaskTry) -> dict[str, str] | None:
        """Push the identity tags the task's job was created with (by this try or an earlier one), and
        return them."""
        tags = run.recorded_identity_tags()
        self._push(run, tags)
        return tags

    @staticmethod
    def _push(run: TaskTry, tags: dict[str, Any] | None) -> None:
        if tags:
            run.context["ti"].xcom_push(key=IDENTITY_XCOM_KEY, value=tags)
