"""The pure domain: preference lists, hardware facts, guardrail decisions, stages, outcomes, job state.

Nothing here imports Airflow, botocore, boto3 or aiobotocore, or a module of this package outside
``domain`` (``tests/test_package.py`` checks it): the operators, sensors, triggers and hooks around it
are the Airflow and AWS glue. See ``docs/architecture.md``.
"""
