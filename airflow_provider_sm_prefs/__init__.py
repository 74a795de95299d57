"""Apache Airflow provider for Amazon SageMaker instance preference lists."""

from __future__ import annotations

from typing import Any

__version__ = "0.1.0"

PACKAGE_NAME = "airflow-provider-sm-prefs"


def get_provider_info() -> dict[str, Any]:
    """Describe this provider to Airflow's ProvidersManager (entry point ``apache_airflow_provider``)."""
    return {
        "package-name": PACKAGE_NAME,
        "name": "SageMaker Instance Preferences",
        "description": (
            "Submit Amazon SageMaker Training and Processing jobs with an ordered list of acceptable "
            "instance types, wait for capacity without holding a worker slot, and hand the chosen "
            "instance type, count, rank and wait time to downstream tasks."
        ),
        "versions": [__version__],
        "integrations": [
            {
                "integration-name": "Amazon SageMaker Instance Preferences",
                "external-doc-url": "https://docs.aws.amazon.com/sagemaker/latest/dg/train-instance-preferences.html",
                "tags": ["aws"],
            }
        ],
        "operators": [
            {
                "integration-name": "Amazon SageMaker Instance Preferences",
                "python-modules": ["airflow_provider_sm_prefs.operators.sagemaker"],
            }
        ],
        "sensors": [
            {
                "integration-name": "Amazon SageMaker Instance Preferences",
                "python-modules": ["airflow_provider_sm_prefs.sensors.capacity"],
            }
        ],
        "hooks": [
            {
                "integration-name": "Amazon SageMaker Instance Preferences",
                "python-modules": ["airflow_provider_sm_prefs.hooks.sagemaker"],
            }
        ],
        "triggers": [
            {
                "integration-name": "Amazon SageMaker Instance Preferences",
                "python-modules": ["airflow_provider_sm_prefs.triggers.capacity"],
            }
        ],
        "extra-links": [
            "airflow_provider_sm_prefs.links.SageMakerPreferenceJobLink",
            "airflow_provider_sm_prefs.links.SageMakerPreferenceJobLogsLink",
            "airflow_provider_sm_prefs.links.CapacityHistoryLink",
        ],
        "config": {
            "sm_prefs": {
                "description": "SageMaker Instance Preferences provider.",
                "options": {
                    "min_defer_seconds": {
                        "description": (
                            "Default of the operators' and the sensor's min_defer_seconds: their trigger "
                            "reports nothing sooner than this many seconds after the task deferred, so a "
                            "job that leaves Pending at once cannot race Airflow's scheduler "
                            "(apache/airflow#72716). 0 turns it off."
                        ),
                        "version_added": None,
                        "type": "float",
                        "example": "15",
                        "default": "15",
                    },
                    "event_queue_url": {
                        "description": (
                            "Event mode: the URL of an SQS queue fed by an EventBridge rule on SageMaker's "
                            "'SageMaker Training Job State Change' and 'SageMaker Processing Job State "
                            "Change' events. Waiting triggers then learn of changes from one long-poll of "
                            "that queue per triggerer and list jobs only as a slow safety net. The AWS "
                            "connection's extra 'sm_prefs_event_queue_url' overrides it per connection. "
                            "Empty: off."
                        ),
                        "version_added": None,
                        "type": "string",
                        "example": "https://sqs.us-east-1.amazonaws.com/123456789012/sagemaker-job-events",
                        "default": "",
                    },
                    "event_safety_list_seconds": {
                        "description": (
                            "In event mode, seconds between the safety List passes that catch a lost "
                            "or late event (while the queue cannot be read, the usual cadence applies)."
                        ),
                        "version_added": None,
                        "type": "float",
                        "example": "300",
                        "default": "300",
                    },
                    "event_detail": {
                        "description": (
                            "In event mode, what a wait does with an event's detail (the job's Describe "
                            "response). 'data': a detail newer than what the wait has seen, that ends the "
                            "wait and holds every field the outcome needs, ends it without a Describe; "
                            "anything else is Described. 'hint': every event that shows a change makes "
                            "the trigger Describe its job."
                        ),
                        "version_added": None,
                        "type": "string",
                        "example": "hint",
                        "default": "data",
                    },
                },
            }
        },
    }
