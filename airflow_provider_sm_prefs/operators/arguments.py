"""The operators' arguments: declared, documented on the operators, stored and checked at parse time.

Every parse of every DAG file constructs every task, so :class:`PreferenceOperatorArguments` only stores
its arguments (no network, no connection, no database) and fails the import on literal arguments that
break a documented rule (:mod:`~.parse_time`). What a try does with them is
:class:`~airflow_provider_sm_prefs.operators.sagemaker.SageMakerPreferenceBaseOperator`'s.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta
from typing import Any, ClassVar

from airflow.sdk import BaseOperator

from airflow_provider_sm_prefs.callbacks import STOP_UNATTENDED_JOB, with_job_stop
from airflow_provider_sm_prefs.domain.kinds import JobKind
from airflow_provider_sm_prefs.domain.preferences import InstancePreferenceList
from airflow_provider_sm_prefs.guardrail_check import GUARDRAIL_FIELDS
from airflow_provider_sm_prefs.job_logs import DEFAULT_MAX_LOG_LINES
from airflow_provider_sm_prefs.links import (
    CapacityHistoryLink,
    SageMakerPreferenceJobLink,
    SageMakerPreferenceJobLogsLink,
)
from airflow_provider_sm_prefs.operators.parse_time import (
    check_literal_arguments,
    plain_literals,
    stored_preferences,
    stored_regions,
)
from airflow_provider_sm_prefs.operators.rendered import Derived, RenderedArguments
from airflow_provider_sm_prefs.operators.task_try import NO_TRY
from airflow_provider_sm_prefs.recording import TryProgress

__all__ = ["PreferenceOperatorArguments"]


class PreferenceOperatorArguments(BaseOperator):
    """The arguments of the preference operators, as stored when the DAG is parsed.

    Documented on :class:`~airflow_provider_sm_prefs.operators.sagemaker.SageMakerPreferenceBaseOperator`,
    which runs them.
    """

    job_kind: ClassVar[JobKind]
    template_fields: Sequence[str] = (
        "config",
        "instance_preferences",
        "max_pending",
        "regions",
        "aws_conn_id",
        "region_name",
        "verify",
        *GUARDRAIL_FIELDS,
    )
    template_fields_renderers: ClassVar[dict[str, str]] = {
        "config": "json",
        "instance_preferences": "json",
        "regions": "json",
    }
    operator_extra_links = (
        SageMakerPreferenceJobLink(),
        SageMakerPreferenceJobLogsLink(),
        CapacityHistoryLink(),
    )
    ui_color = "#e6f4ea"

    config: Any
    instance_preferences: Any
    max_pending: Any
    regions: Any
    aws_conn_id: str | None
    region_name: str | None
    verify: bool | str | None
    wait_for_completion: bool
    poll_interval: float
    max_poll_interval: float | None
    deferrable: bool
    stop_job_on_kill: bool
    min_defer_seconds: float | None
    print_log: bool
    max_log_lines: int
    botocore_config: dict[str, Any] | None
    requirements: Any
    max_hourly_cost: Any
    max_cost_increase: Any
    preflight: Any
    prices: Any
    identity_tags: bool
    finish_in_triggerer: bool
    #: The list as last parsed: at DAG parse time when literal, then in each try after templating.
    _preferences: InstancePreferenceList | None
    #: The rendered arguments, checked (:meth:`~.sagemaker.SageMakerPreferenceBaseOperator.prepare`).
    _rendered: Derived[RenderedArguments]
    #: The rendered config, decoded.
    _config: Derived[Any]
    #: ``max_pending`` in seconds.
    _pending: Derived[int | None]

    @classmethod
    def partial(cls, **kwargs: Any) -> Any:
        """``.partial()`` with :data:`STOP_UNATTENDED_JOB` after the user's (or the DAG's) failure callbacks.

        ``.partial()`` does not call ``__init__``; what it records is what the scheduler reads to decide
        whether a mapped task failed outside its process gets a failure callback. Airflow 3.0 to 3.2 record
        only the callbacks given (none by default), and a DAG's ``default_args`` callback replaces the
        operator's default on every minor: the stop is added here, after whatever Airflow merged in.
        """
        mapped = super().partial(**kwargs)
        mapped.kwargs["on_failure_callback"] = with_job_stop(mapped.kwargs.get("on_failure_callback"))
        return mapped

    def __init__(
        self,
        *,
        config: dict[str, Any],
        instance_preferences: Any = None,
        max_pending: timedelta | int | float | str | None = None,
        regions: Any = None,
        wait_for_completion: bool = True,
        poll_interval: float = 30.0,
        max_poll_interval: float | None = None,
        deferrable: bool = True,
        stop_job_on_kill: bool = True,
        min_defer_seconds: float | None = None,
        print_log: bool = True,
        max_log_lines: int = DEFAULT_MAX_LOG_LINES,
        requirements: Any = None,
        max_hourly_cost: float | str | None = None,
        max_cost_increase: float | str | None = None,
        preflight: str = "prune",
        prices: dict[str, float] | None = None,
        identity_tags: bool = True,
        finish_in_triggerer: bool = True,
        aws_conn_id: str | None = "aws_default",
        region_name: str | None = None,
        verify: bool | str | None = None,
        botocore_config: dict[str, Any] | None = None,
        on_failure_callback: Any = STOP_UNATTENDED_JOB,
        **kwargs: Any,
    ) -> None:
        # Stop the job if the task fails for good while it still runs, also when Airflow fails the task
        # without running it (scheduler race apache/airflow#72716): see callbacks.py. The default is also
        # what .partial() records for mapped tasks; a user's callbacks run first.
        super().__init__(on_failure_callback=with_job_stop(on_failure_callback), **kwargs)
        # Stored in one step: during __init__, BaseOperator.__setattr__ only looks for a converter (none
        # of these names has one) and records kwargs that apply_defaults overwrites when __init__
        # returns; XCom references are found afterwards. Setting them one by one, on every parse of
        # every task, was most of what this operator added to a DAG's parse time (docs/performance.md).
        vars(self).update(
            config=config,
            instance_preferences=stored_preferences(instance_preferences),
            max_pending=max_pending,
            regions=stored_regions(regions),
            aws_conn_id=aws_conn_id,
            region_name=region_name,
            verify=verify,
            requirements=requirements.as_dict() if hasattr(requirements, "as_dict") else requirements,
            max_hourly_cost=max_hourly_cost,
            max_cost_increase=max_cost_increase,
            preflight=preflight,
            prices=prices,
            wait_for_completion=wait_for_completion,
            poll_interval=poll_interval,
            max_poll_interval=max_poll_interval,
            deferrable=deferrable,
            stop_job_on_kill=stop_job_on_kill,
            min_defer_seconds=min_defer_seconds,
            print_log=print_log,
            max_log_lines=max_log_lines,
            botocore_config=botocore_config,
            identity_tags=identity_tags,
            finish_in_triggerer=finish_in_triggerer,
            _progress=TryProgress(),
            _try=NO_TRY,
            _guardrails=None,
            _windows=None,
            _rendered=Derived(),
            _config=Derived(),
            _pending=Derived(),
            _waited=None,
            _region=None,
        )
        # Literal arguments fail the DAG import at parse time; templated ones are checked in execute().
        # The list parsed here is kept (execute parses the rendered list once more, after templating).
        vars(self)["_preferences"] = check_literal_arguments(
            self.job_kind,
            config,
            self.instance_preferences,
            max_pending,
            (self.requirements, max_hourly_cost, max_cost_increase, preflight, prices),  # GUARDRAIL_FIELDS
            self.log,
            self.regions,
            region_name,
        )

    def _set_xcomargs_dependencies(self) -> None:
        """Airflow's search of the template fields for XComArgs, skipped when they are plain literals.

        Only trees of exact builtin types pass :func:`~.parse_time.plain_literals`, and they cannot hold an
        XComArg; any other value (an ``.output``, a custom type) gets Airflow's full walk (see
        docs/performance.md for the cost).
        """
        values = [getattr(self, name, None) for name in self.template_fields]
        if not plain_literals(v for v in values if not isinstance(v, timedelta)):
            super()._set_xcomargs_dependencies()
