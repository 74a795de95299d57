"""Two cost fixes for moto's SQS, which the offline SageMaker serves for event mode. Behaviour unchanged.

moto's ``ReceiveMessage`` checks each message it returns against the queue's retention period by
computing *every* queue attribute (``ApproximateNumberOfMessages`` among them, a scan of the queue), and
its messages compute "now" through ``datetime`` arithmetic for every visibility check: a receive costs
about 0.5 ms per message in the queue (370 ms with 800 messages waiting, 1.4 s with 3,000), where SQS
answers in constant time. Event mode at scale (thousands of events in flight) would measure moto, not the
provider. Applied once, when the emulator starts serving (:mod:`.handler` imports moto's server).
"""

from __future__ import annotations

import time
from typing import Any

__all__ = ["apply"]

_APPLIED = False


def apply() -> None:
    """Patch moto's SQS models in this process (idempotent)."""
    global _APPLIED
    if _APPLIED:
        return
    from moto.sqs.models import Message, SQSBackend

    def is_message_valid_based_on_retention_period(self: Any, queue_name: str, message: Any) -> bool:
        retention = int(self.get_queue(queue_name).message_retention_period)
        return bool(retention + message.sent_timestamp / 1000 > time.time())

    def visible(self: Any) -> bool:
        return bool(time.time() * 1000.0 > self.visible_at)

    def delayed(self: Any) -> bool:
        return bool(time.time() * 1000.0 < self.delayed_until)

    SQSBackend.is_message_valid_based_on_retention_period = is_message_valid_based_on_retention_period  # type: ignore[method-assign]
    Message.visible = property(visible)  # type: ignore[method-assign,assignment]
    Message.delayed = property(delayed)  # type: ignore[method-assign,assignment]
    _APPLIED = True
