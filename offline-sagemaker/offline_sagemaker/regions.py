"""The regions of the offline SageMaker: one world per AWS region, all on one emulated clock.

SageMaker is regional: a job's name is unique within its account and region, its ARN names the region,
and each region has its own capacity, quotas and training plans. A call is answered by the world of the
region its SigV4 signature names (``Credential=<key>/<date>/<region>/sagemaker/aws4_request``); the
scenario's own region answers unsigned calls. A region's world starts at its first call, with the
settings the scenario's ``regions`` gives it (the scenario's own otherwise); its capacity windows count
from the start of the scenario, as every region's do.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator

from offline_sagemaker.api import SageMakerApi
from offline_sagemaker.clock import EmulatedClock
from offline_sagemaker.engine import Engine
from offline_sagemaker.models import Job
from offline_sagemaker.scenario_types import Scenario

__all__ = ["Regions", "region_of_arn", "signed_region"]

#: The region of a SigV4 credential scope: ``Credential=<key id>/<yyyymmdd>/<region>/<service>/...``.
_SCOPE = re.compile(r"\bCredential=[^/,\s]+/\d{8}/([a-z0-9-]+)/")


def signed_region(authorization: str | None) -> str | None:
    """The region a request was signed for (its SigV4 ``Authorization`` header), or None."""
    match = _SCOPE.search(authorization or "")
    return match.group(1) if match else None


def region_of_arn(arn: str) -> str:
    """The region field of an ARN (``arn:<partition>:<service>:<region>:...``)."""
    return arn.split(":")[3]


class Regions:
    """Every region's world: the home one (the scenario's region) from the start, the others as called.

    Not thread-safe: the service holds its lock around every use.

    :param scenario: the scenario in force.
    :param real_clock: monotonic real seconds.
    :param wall_clock: real epoch seconds, for the emulated epoch when the scenario gives none.
    """

    def __init__(
        self, scenario: Scenario, real_clock: Callable[[], float], wall_clock: Callable[[], float]
    ) -> None:
        self.clock = EmulatedClock(real_clock, wall_clock)
        self.clock.restart(scenario)
        #: The world of the scenario's own region (the same object across resets).
        self.home = Engine(scenario, clock=self.clock)
        self.home_api = SageMakerApi(self.home)
        self._others: dict[str, tuple[Engine, SageMakerApi]] = {}
        self._observer: Callable[[Job, float], None] | None = None

    def observe(self, observer: Callable[[Job, float], None]) -> None:
        """Tell ``observer`` of every change of a job in any region (see :attr:`Engine.observer`)."""
        self._observer = observer
        for engine in self.engines():
            engine.observer = observer

    def reset(self, scenario: Scenario | None = None) -> None:
        """Forget every region's jobs and clusters and restart the clock (with ``scenario`` if given)."""
        self.clock.restart(scenario or self.home.scenario)
        self.home.reset(scenario)
        self._others.clear()

    def world(self, region: str | None) -> tuple[Engine, SageMakerApi]:
        """The engine and API of ``region`` (None: the home region's)."""
        if region is None or region == self.home.scenario.region:
            return self.home, self.home_api
        world = self._others.get(region)
        if world is None:
            engine = Engine(self.home.scenario.in_region(region), clock=self.clock)
            engine.observer = self._observer
            world = self._others[region] = (engine, SageMakerApi(engine))
        return world

    def engines(self) -> Iterator[Engine]:
        """The home world, then the others in the order they were first called."""
        yield self.home
        for engine, _ in self._others.values():
            yield engine

    def sync(self) -> float:
        """Bring every region up to the emulated now; returns it."""
        for engine in self.engines():
            engine.sync()
        return self.clock.now()

    def advance(self, seconds: float) -> float:
        """Jump the clock forward and bring every region up to it; returns the new now."""
        self.clock.advance(seconds)
        return self.sync()

    def find(self, name: str, region: str | None = None) -> Job | None:
        """The job named ``name`` in ``region`` (None: the home region first, then the others)."""
        engines = [self.world(region)[0]] if region is not None else list(self.engines())
        for engine in engines:
            job = engine.find(name)
            if job is not None:
                return job
        return None

    def jobs(self) -> list[Job]:
        """Every region's jobs: the home region's, then each other region's, in creation order."""
        return [job for engine in self.engines() for job in engine.jobs()]
