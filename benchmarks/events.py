"""The event route of the ``events`` variant: an EventBridge rule for SageMaker job state changes with an
SQS queue as its target, on the emulator's endpoint (moto serves both services there).

What a deployment sets up once per account and region, made per run here so that no event of one run
reaches the next: the queue is created when the run's trigger process is spawned (its URL goes into
the process's environment), the rule is put when the run starts, and both are deleted when it ends.
"""

from __future__ import annotations

import json
from typing import Any

from benchmarks.workload import harness_client

#: What the rule matches: SageMaker's state-change events for training and processing jobs.
EVENT_PATTERN: dict[str, Any] = {
    "source": ["aws.sagemaker"],
    "detail-type": ["SageMaker Training Job State Change", "SageMaker Processing Job State Change"],
}


class EventRoute:
    """An SQS queue, and (once :meth:`connect` ed) an EventBridge rule that sends SageMaker job state
    changes to it. Calls are signed with the harness's access key id.

    :param emulator: an ``OfflineSageMaker``/``RemoteSageMaker`` handle (endpoint and region).
    :param name: queue and rule name (letters, digits, ``-``, ``_``; at most 64 characters).
    """

    def __init__(self, emulator: Any, name: str) -> None:
        self.name = name[:64]
        self._sqs = harness_client(emulator, "sqs")
        self._events = harness_client(emulator, "events")
        self.queue_url: str = self._sqs.create_queue(QueueName=self.name)["QueueUrl"]
        attributes = self._sqs.get_queue_attributes(QueueUrl=self.queue_url, AttributeNames=["QueueArn"])
        self.queue_arn: str = attributes["Attributes"]["QueueArn"]
        self.connected = False

    def connect(self) -> None:
        """Put the rule and its SQS target (the queue again first, in case it went with a reset)."""
        self._sqs.create_queue(QueueName=self.name)
        # On AWS the queue's policy must let EventBridge send to it; moto does not check, but the
        # route is set up as a deployment would set it up.
        rule_arn = self._events.put_rule(
            Name=self.name, EventPattern=json.dumps(EVENT_PATTERN), State="ENABLED"
        )["RuleArn"]
        policy = {
            "Version": "2012-10-17",
            "Statement": [
                {
                    "Effect": "Allow",
                    "Principal": {"Service": "events.amazonaws.com"},
                    "Action": "sqs:SendMessage",
                    "Resource": self.queue_arn,
                    "Condition": {"ArnEquals": {"aws:SourceArn": rule_arn}},
                }
            ],
        }
        self._sqs.set_queue_attributes(QueueUrl=self.queue_url, Attributes={"Policy": json.dumps(policy)})
        self._events.put_targets(Rule=self.name, Targets=[{"Id": "sqs", "Arn": self.queue_arn}])
        self.connected = True

    def close(self) -> dict[str, Any]:
        """Delete the rule and the queue; returns what is recorded with the run (messages left unread)."""
        record: dict[str, Any] = {"queue_url": self.queue_url, "rule": self.name, "pattern": EVENT_PATTERN}
        try:
            attributes = self._sqs.get_queue_attributes(
                QueueUrl=self.queue_url,
                AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"],
            )["Attributes"]
            record["messages_left"] = int(attributes.get("ApproximateNumberOfMessages", 0))
            record["messages_in_flight"] = int(attributes.get("ApproximateNumberOfMessagesNotVisible", 0))
        except Exception as err:  # the figures of the run do not depend on it
            record["messages_left_error"] = f"{type(err).__name__}: {err}"
        if self.connected:
            self._events.remove_targets(Rule=self.name, Ids=["sqs"])
            self._events.delete_rule(Name=self.name)
            self.connected = False
        self._sqs.delete_queue(QueueUrl=self.queue_url)
        return record
