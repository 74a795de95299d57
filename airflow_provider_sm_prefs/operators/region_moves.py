"""The operators' side of regions after the task's own: where a try reaches SageMaker as its stages move.

A stage of :class:`~.windows.AcceptanceWindows` may run in another region
(:mod:`airflow_provider_sm_prefs.domain.regions`). The operator then reaches SageMaker there: its hook, the
triggers of its waits and submit-once are built for that region and, if the region names one, its
connection. A try that goes on from a stage in another region (a resume, a retry after a kill) looks at
the recorded stage first and acts on that stage's job where it is.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import TYPE_CHECKING, Any, ClassVar

from airflow_provider_sm_prefs.compat import AirflowFailException
from airflow_provider_sm_prefs.domain import exceptions as errors
from airflow_provider_sm_prefs.domain.kinds import JobKind
from airflow_provider_sm_prefs.domain.regions import FailoverRegion, region_request, s3_buckets
from airflow_provider_sm_prefs.hooks.sagemaker import AwsSettings
from airflow_provider_sm_prefs.operators.windows import AcceptanceWindows

if TYPE_CHECKING:
    from airflow_provider_sm_prefs.hooks.sagemaker import SageMakerPreferenceHook

__all__ = ["RegionMoves"]


class RegionMoves:
    """Where the preference operators reach SageMaker (a mixin of
    :class:`~airflow_provider_sm_prefs.operators.sagemaker.SageMakerPreferenceBaseOperator`)."""

    #: The region the current stage runs in, when it moved the job out of the task's own region.
    _region: FailoverRegion | None
    _windows: AcceptanceWindows | None
    job_kind: ClassVar[JobKind]

    if TYPE_CHECKING:
        log: Any

        @property
        def hook(self) -> SageMakerPreferenceHook: ...

    def _aws(self) -> AwsSettings:
        """How this try reaches SageMaker now: the task's settings, in the current stage's region."""
        settings = AwsSettings.of(self)
        region = self._region
        if region is None:
            return settings
        return replace(
            settings, aws_conn_id=region.aws_conn_id or settings.aws_conn_id, region_name=region.region
        )

    def _move_to(self, region: FailoverRegion | None) -> None:
        """Reach SageMaker in ``region`` from now on (None: the task's own region): the hook, the waits'
        triggers and submit-once are built again for it; the windows act on the current stage's job."""
        if region == self._region:
            return
        self._region = region
        for built in ("hook", "capacity_wait", "submit_once"):
            self.__dict__.pop(built, None)
        if self._windows is not None:
            self._windows.hook = self.hook

    def _check_regions_at_run_time(
        self, regions: tuple[FailoverRegion, ...], request: Mapping[str, Any]
    ) -> None:
        """What only a running task can check of its regions, before its first Create: none is the task's own
        region (its connection's), and every S3 bucket a region's request names is in that region
        (``GetBucketLocation``; a bucket whose region cannot be read is logged, and left to SageMaker).

        :raises AirflowFailException: naming each region, field and fix.
        """
        if not regions:
            return
        hook = AwsSettings.of(self).hook()  # the task's own, wherever this try is
        home, lookups = hook.conn_region_name, hook.lookups
        problems = []
        for i, region in enumerate(regions):
            where = f"regions[{i}] ({region.region})"
            if region.region == home:
                problems.append(
                    f"{where}: {region.region} is the task's own region (its connection's); name another"
                )
                continue
            for field, bucket in s3_buckets(self.job_kind, region_request(request, region)):
                found = lookups.bucket_region(bucket)
                if found is None:
                    self.log.info(
                        "%s: the region of S3 bucket %s (%s) could not be read; SageMaker refuses a bucket of "
                        "another region when the job moves there",
                        where,
                        bucket,
                        field,
                    )
                elif found != region.region:
                    problems.append(
                        f"{where}: {field} names S3 bucket {bucket}, which is in {found} (GetBucketLocation); "
                        f"give a bucket of {region.region} in the overrides"
                    )
        if problems:
            raise AirflowFailException(str(errors.InvalidInstancePreferencesError(problems)))
