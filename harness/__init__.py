"""Development harness of this repository; not part of the wheel (which packages only the provider).

- :mod:`harness.deployment`: ``make airflow`` and the e2e suite's local Airflow, :class:`LocalAirflow`,
  a facade over :mod:`~harness.config`, :mod:`~harness.supervisor`, :mod:`~harness.emulator`,
  :mod:`~harness.database` (with :mod:`~harness.postgres`), :mod:`~harness.rest` and :mod:`~harness.waits`.
- :mod:`harness.demo`: ``make demo``.
- :mod:`harness.iam`: the IAM policy evaluator the tests hold ``docs/iam-policy.json`` to.

It reads this checkout's ``dags_examples`` and ``tests/dags`` and needs the dev dependencies (psycopg2,
asyncpg); it uses the offline SageMaker only through ``offline_sagemaker``'s public names
and the ``sm-prefs-emulator`` console script.
"""
