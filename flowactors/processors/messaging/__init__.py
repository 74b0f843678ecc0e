"""Message-broker processors: ConsumeMQTT / PublishMQTT (paho-mqtt) and ConsumeAMQP / PublishAMQP
(pika, AMQP 0-9-1), as NiFi 2's; docs/messaging.md describes them, their delivery semantics and
every difference from NiFi."""

from flowactors.processors.messaging.amqp import ConsumeAMQP, PublishAMQP
from flowactors.processors.messaging.mqtt import ConsumeMQTT, PublishMQTT

__all__ = ["ConsumeAMQP", "ConsumeMQTT", "PublishAMQP", "PublishMQTT"]
