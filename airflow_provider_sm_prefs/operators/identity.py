"""The identity tags of a task's try: read from its context and Airflow's config, at run time.

What the tags are and how they are checked is :mod:`airflow_provider_sm_prefs.domain.identity`; this
module only reads what the domain needs from Airflow: the task instance, the deployment id and
``[sm_prefs] identity_tags``, the deployment-wide switch. Config is read when a try runs, never when the
DAG is parsed.

The deployment id is ``[sm_prefs] deployment_id`` when set. Otherwise it is generated once per deployment
(:func:`~.domain.identity.new_deployment_id`) and kept in the metadata database as the Airflow Variable
:data:`DEPLOYMENT_VARIABLE`, which every component reads through the Task SDK (a secrets backend or an
``AIRFLOW_VAR_SM_PREFS_DEPLOYMENT_ID`` environment variable serves it too). Two deployments started from
the same compose file have two databases and so two ids; the ids earlier releases derived from the API
server's URL were shared by such deployments (:func:`legacy_deployment_ids`).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from airflow_provider_sm_prefs.compat import AirflowFailException
from airflow_provider_sm_prefs.domain.exceptions import InvalidInstancePreferencesError
from airflow_provider_sm_prefs.domain.identity import (
    IDENTITY_XCOM_KEY,
    AirflowIdentity,
    IdentityKey,
    OwnerClaim,
    default_deployment_id,
    new_deployment_id,
    tag_value,
    with_identity,
)

if TYPE_CHECKING:
    from airflow_provider_sm_prefs.domain.job_state import JobState
    from airflow_provider_sm_prefs.operators.task_try import TaskTry

__all__ = [
    "CREATED_VARIABLE",
    "DEPLOYMENT_VARIABLE",
    "IdentityTags",
    "deployment_claim",
    "deployment_id",
    "identity_of",
    "identity_tags_enabled",
    "job_claim",
    "legacy_deployment_ids",
    "settled_deployment_id",
    "task_claim",
]

log = logging.getLogger(__name__)

#: The Airflow Variable that keeps the generated deployment id.
DEPLOYMENT_VARIABLE = "sm_prefs_deployment_id"
#: After creating the Variable, how long to wait before reading it back: two components that found it
#: missing at the same instant both wrote; the read after both writes gives both the same id.
CREATE_SETTLE_SECONDS = 1.0
#: The Variable that keeps when the id was last written (epoch seconds, written before the id): a reader
#: that finds a younger id waits until no first write still under way can replace it.
CREATED_VARIABLE = "sm_prefs_deployment_id_created"
#: Clock difference between hosts allowed for when judging an id's age.
CLOCK_SKEW_SECONDS = 5.0
_generated: dict[str, str] = {}
_generated_lock = threading.Lock()


def identity_tags_enabled(argument: bool) -> bool:
    """Whether a task sends identity tags: its ``identity_tags`` argument and ``[sm_prefs] identity_tags``."""
    if not argument:
        return False
    from airflow.configuration import conf

    return conf.getboolean("sm_prefs", "identity_tags", fallback=True)


def deployment_id() -> str:
    """This deployment's id: ``[sm_prefs] deployment_id``, else the generated one kept in the Variable
    :data:`DEPLOYMENT_VARIABLE` (created on first use), read once per process.

    :raises AirflowFailException: when neither is set and the Variable can be neither read nor created
        (then nothing can be proved ours, so nothing is tagged, adopted or stopped).
    """
    from airflow.configuration import conf

    given = (conf.get("sm_prefs", "deployment_id", fallback="") or "").strip()
    if given:
        return given
    with _generated_lock:
        if DEPLOYMENT_VARIABLE not in _generated:
            _generated[DEPLOYMENT_VARIABLE] = _stored_or_created()
        return _generated[DEPLOYMENT_VARIABLE]


def _stored_or_created() -> str:
    from airflow.sdk import Variable

    from airflow_provider_sm_prefs.compat import set_variable

    def read(key: str) -> str | None:
        value = Variable.get(key, default=None)
        return str(value).strip() or None if value is not None else None

    def write(key: str, value: str) -> None:
        set_variable(key, value, _DESCRIPTIONS[key])

    try:
        chosen = settled_deployment_id(read, write, time.time, time.sleep)
    except Exception as err:
        raise AirflowFailException(
            f"The deployment id could not be read or created in the Airflow Variable {DEPLOYMENT_VARIABLE!r} "
            f"({type(err).__name__}: {err}); set [sm_prefs] deployment_id to a name unique to this deployment"
        ) from err
    log.info("This deployment's id is %s (Airflow Variable %s)", chosen, DEPLOYMENT_VARIABLE)
    return chosen


_DESCRIPTIONS = {
    DEPLOYMENT_VARIABLE: "This Airflow deployment's id in the sm-prefs:deployment tag of the SageMaker jobs and "
    "clusters it creates (airflow-provider-sm-prefs). Generated once; never change it while jobs run.",
    CREATED_VARIABLE: "When sm_prefs_deployment_id was generated (epoch seconds; airflow-provider-sm-prefs).",
}


def settled_deployment_id(
    read: Callable[[str], str | None],
    write: Callable[[str, str], None],
    now: Callable[[], float],
    sleep: Callable[[float], None],
) -> str:
    """The deployment id every component agrees on: the stored one, or a new one once its writes settled.

    The Task SDK can only overwrite a Variable, so components that find no id at the same instant each
    write one, and the last write wins. A writer waits :data:`CREATE_SETTLE_SECONDS` and takes what is
    stored then. A reader that finds an id written less than that (plus :data:`CLOCK_SKEW_SECONDS`) ago
    may have read one a concurrent first write is about to replace: it waits until that time has passed
    and reads again, so no process keeps an id the deployment does not have. An id without a write time
    (an earlier release's, or one set by hand) is taken at once.
    """
    stored = read(DEPLOYMENT_VARIABLE)
    if stored is None:
        write(CREATED_VARIABLE, f"{now():.3f}")  # before the id: a reader of the id finds its age
        write(DEPLOYMENT_VARIABLE, new_deployment_id())
        sleep(CREATE_SETTLE_SECONDS)
        stored = read(DEPLOYMENT_VARIABLE)
        if stored is None:
            raise RuntimeError(f"the Variable {DEPLOYMENT_VARIABLE} was written but reads back empty")
    for _ in range(10):  # each round outlasts the writes of one burst of first components
        try:
            written = float(read(CREATED_VARIABLE) or "nan")
        except ValueError:
            return stored
        young = written + CREATE_SETTLE_SECONDS + CLOCK_SKEW_SECONDS - now()
        if not young > 0:  # also when no write time is stored (nan)
            return stored
        sleep(young)
        stored = read(DEPLOYMENT_VARIABLE) or stored
    return stored


def legacy_deployment_ids() -> list[str]:
    """The ids earlier releases derived for this deployment from its URLs (shared by every deployment with
    the same URLs): jobs tagged with them are recognised and reported, and stopped only on request."""
    from airflow.configuration import conf

    found: list[str] = []
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
            found.append(default_deployment_id(source.strip()))
            break
    if not found:
        found.append(default_deployment_id(None))
    return found


def identity_of(context: Any, hand_off: bool = False) -> AirflowIdentity:
    """The identity of the try ``context`` belongs to (``hand_off``: it leaves its job running on success)."""
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
        hand_off=hand_off,
    )


def task_claim(context: Any) -> OwnerClaim:
    """What proves a job the task instance of ``context``'s when no job state says more: identity tags
    naming this deployment and that task instance (any try)."""
    return OwnerClaim.of_tags(identity_of(context).as_dict())


def job_claim(
    state: JobState | None, job_name: str, context: Any, known_tags: Mapping[str, Any] | None = None
) -> OwnerClaim:
    """What proves ``job_name`` the task instance of ``context``'s, best first: the job state recorded with
    it (the identity tags its Create carried, or that this task's Create made it), the identity tags this
    try knows it was created with (``known_tags``), else tags naming this deployment and task instance (a
    job state of an earlier release, or none reachable)."""
    if state is not None and state.job_name == job_name:
        recorded = state.claim()
        if recorded.tags or recorded.created:
            return recorded
    if known_tags:
        return OwnerClaim.of_tags(known_tags)
    return task_claim(context) if context is not None else OwnerClaim()


def deployment_claim() -> OwnerClaim:
    """A claim that names only this deployment: what a sensor asked to stop the job it watches proves."""
    return OwnerClaim.of_tags({IdentityKey.DEPLOYMENT.value: tag_value(deployment_id())})


class IdentityTags:
    """A task's identity tags: checked before any AWS call, added to each Create, recorded with the job.

    They are set at Create only. A try that reattaches to a running job (or returns a completed one's
    outcome) reports the tags recorded with that job, which name the try that created it.

    :param enabled: the operator's ``identity_tags`` argument (``[sm_prefs] identity_tags`` also applies).
    :param hand_off: the task leaves its job running when it succeeds (``wait_for_completion=False``).
    """

    def __init__(self, enabled: bool, hand_off: bool = False) -> None:
        self.enabled = enabled
        self.hand_off = hand_off

    def of(self, context: Any) -> AirflowIdentity | None:
        """This try's identity, or None when identity tags are off (argument or config)."""
        return identity_of(context, self.hand_off) if identity_tags_enabled(self.enabled) else None

    def claim(self, context: Any) -> OwnerClaim | None:
        """What makes a job this task instance's: its owner tags (None when identity tags are off)."""
        identity = self.of(context)
        return OwnerClaim.of_tags(identity.as_dict()) if identity is not None else None

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
