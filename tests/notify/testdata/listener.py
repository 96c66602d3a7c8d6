"""An oslo.messaging notification listener for tests/notify.

Usage: listener.py TRANSPORT_URL TOPIC [TOPIC ...]

Listens, through oslo.messaging's own notification listener (as
Ceilometer's notification agent does), on the given topics of the
transport's control exchange, and prints every notification it is handed
as one JSON line on stdout: priority, publisher_id, event_type, payload
and the metadata (message_id, timestamp). Prints READY once the listener
has started, and stops when stdin closes.
"""
import json
import sys
import threading

from oslo_config import cfg
import oslo_messaging

lock = threading.Lock()


def emit(obj):
    with lock:
        sys.stdout.write(json.dumps(obj, sort_keys=True) + "\n")
        sys.stdout.flush()


class Endpoint(object):
    def _handle(self, priority, ctxt, publisher_id, event_type, payload, metadata):
        emit({"priority": priority, "publisher_id": publisher_id,
              "event_type": event_type, "payload": payload,
              "message_id": metadata.get("message_id"),
              "timestamp": metadata.get("timestamp"),
              "context": ctxt})
        return oslo_messaging.NotificationResult.HANDLED

    def info(self, ctxt, publisher_id, event_type, payload, metadata):
        return self._handle("info", ctxt, publisher_id, event_type, payload, metadata)

    def warn(self, ctxt, publisher_id, event_type, payload, metadata):
        return self._handle("warn", ctxt, publisher_id, event_type, payload, metadata)

    def error(self, ctxt, publisher_id, event_type, payload, metadata):
        return self._handle("error", ctxt, publisher_id, event_type, payload, metadata)


def main():
    url, topics = sys.argv[1], sys.argv[2:]
    conf = cfg.ConfigOpts()
    conf([], project="leasehold-notify-test", default_config_files=[], default_config_dirs=[])
    transport = oslo_messaging.get_notification_transport(conf, url=url)
    targets = [oslo_messaging.Target(topic=t) for t in topics]
    listener = oslo_messaging.get_notification_listener(
        transport, targets, [Endpoint()], executor="threading")
    listener.start()
    emit({"ready": True})
    sys.stdin.read()  # until the test closes it
    listener.stop()
    listener.wait()
    transport.cleanup()


if __name__ == "__main__":
    main()
