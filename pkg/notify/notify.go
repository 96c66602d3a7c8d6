// Package notify sends Leasehold's usage notifications (lease.create,
// lease.event.start_lease, …) as oslo.messaging does, so that Ceilometer
// and any other oslo.messaging notification listener read them unchanged.
//
// A write transaction records each notification as an outbox row
// (Notifier.Action, kind KindLease) in the same transaction that makes
// the change: it exists exactly when the change commits, and the outbox
// worker publishes it after the commit (Notifier.Handlers), so a broker
// that is down never fails or slows a request: the rows wait, retried
// with the outbox's backoff (without a limit on the attempts: the server
// names KindLease in outbox.Config.KeepRetrying), and go out when it is
// back.
//
// The message is built when the row is written: message_id, timestamp and
// payload are fixed then, so a publish repeated after a lost publisher
// confirm (or a process killed between the confirm and the row's
// completion) carries the same message_id and _unique_id and a consumer
// can recognise it. Exactly one row is written per event; the outbox's
// claim makes one worker publish it, whatever the number of processes.
//
// Wire format, as oslo.messaging's rabbit driver writes it: the driver
// messagingv2 wraps the message in the 2.0 envelope
// {"oslo.version": "2.0", "oslo.message": "<the message as JSON>"};
// messaging sends the bare message (1.0). It is published, with publisher
// confirms, persistent, as application/json, to the topic exchange
// [DEFAULT] control_exchange ("openstack") with routing key
// <topic>.<priority> (priority in lower case: "notifications.info") for
// each of [oslo_messaging_notifications] topics; before the first publish
// on a connection the exchange and a queue named after the routing key,
// bound to it, are declared, so notifications sent before any listener
// ran are kept.
package notify

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/leasehold/leasehold/pkg/outbox"
)

// KindLease is the outbox kind of a lease notification.
const KindLease = "notify.lease"

// The drivers of [oslo_messaging_notifications] driver.
const (
	DriverMessagingV2 = "messagingv2"
	DriverMessaging   = "messaging"
	DriverLog         = "log"
	DriverNoop        = "noop"
)

// PriorityInfo is the priority of every lease notification (Blazar sends
// them with notifier.info).
const PriorityInfo = "INFO"

// envelopeVersion is oslo.messaging's message envelope version.
const envelopeVersion = "2.0"

// Config is what the notifier needs from the configuration.
type Config struct {
	// Drivers are [oslo_messaging_notifications] driver.
	Drivers []string
	// Topics are [oslo_messaging_notifications] topics (default
	// ["notifications"]).
	Topics []string
	// TransportURL is the notification transport URL (required when a
	// messaging driver is on).
	TransportURL string
	// Exchange is [DEFAULT] control_exchange (default "openstack").
	Exchange string
	// Durable is [oslo_messaging_rabbit] amqp_durable_queues.
	Durable bool
	// PublisherID is [notifications] publisher_id (default
	// "blazar.lease").
	PublisherID string
	// Logger receives the log driver's notifications (default
	// slog.Default()).
	Logger *slog.Logger
}

// Notifier builds notification rows and publishes them. A nil *Notifier,
// or one whose drivers are all noop, sends nothing: Enabled is false and
// callers enqueue nothing.
type Notifier struct {
	cfg       Config
	v1, v2    bool
	log       bool
	transport *Transport
	logger    *slog.Logger
}

// New checks cfg and returns its notifier; with no driver but noop it
// returns nil, nil. Nothing is connected until the first publish.
func New(cfg Config) (*Notifier, error) {
	n := &Notifier{cfg: cfg, logger: cfg.Logger}
	if n.logger == nil {
		n.logger = slog.Default()
	}
	for _, d := range cfg.Drivers {
		switch strings.TrimSpace(d) {
		case DriverMessagingV2:
			n.v2 = true
		case DriverMessaging:
			n.v1 = true
		case DriverLog:
			n.log = true
		case DriverNoop, "":
		default:
			return nil, fmt.Errorf("notify: [oslo_messaging_notifications] driver %q is not served (messagingv2, messaging, log or noop)", d)
		}
	}
	if !n.v1 && !n.v2 && !n.log {
		return nil, nil
	}
	if len(n.cfg.Topics) == 0 {
		n.cfg.Topics = []string{"notifications"}
	}
	if n.cfg.Exchange == "" {
		n.cfg.Exchange = "openstack"
	}
	if n.cfg.PublisherID == "" {
		n.cfg.PublisherID = "blazar.lease"
	}
	if n.v1 || n.v2 {
		u, err := ParseTransportURL(cfg.TransportURL)
		if err != nil {
			return nil, err
		}
		n.transport = NewTransport(u, n.cfg.Exchange, n.cfg.Durable)
	}
	return n, nil
}

// Enabled reports whether notifications are sent at all.
func (n *Notifier) Enabled() bool { return n != nil }

// Transport is the broker connection (nil when only the log driver is on).
func (n *Notifier) Transport() *Transport {
	if n == nil {
		return nil
	}
	return n.transport
}

// Close closes the broker connection.
func (n *Notifier) Close() error {
	if n == nil || n.transport == nil {
		return nil
	}
	return n.transport.Close()
}

// Message is one notification as oslo.messaging's Notifier builds it, and
// as the outbox row stores it.
type Message struct {
	MessageID   string          `json:"message_id"`
	PublisherID string          `json:"publisher_id"`
	EventType   string          `json:"event_type"`
	Priority    string          `json:"priority"`
	Payload     json.RawMessage `json:"payload"`
	// Timestamp is Python's str() of a naive UTC datetime, as
	// oslo.messaging writes it: "2026-11-25 10:35:07.123456" (no
	// fraction when the microseconds are zero).
	Timestamp string `json:"timestamp"`
}

// FormatTimestamp formats t as str(datetime) does for a naive UTC time.
func FormatTimestamp(t time.Time) string {
	t = t.UTC().Truncate(time.Microsecond)
	if t.Nanosecond() == 0 {
		return t.Format("2006-01-02 15:04:05")
	}
	return t.Format("2006-01-02 15:04:05.000000")
}

// NewMessage builds a message with a new message id.
func NewMessage(publisherID, eventType string, payload any, now time.Time) (Message, error) {
	raw, err := json.Marshal(payload)
	if err != nil {
		return Message{}, fmt.Errorf("notify: encode the payload of %s: %w", eventType, err)
	}
	return Message{MessageID: uuid.NewString(), PublisherID: publisherID, EventType: eventType,
		Priority: PriorityInfo, Payload: raw, Timestamp: FormatTimestamp(now)}, nil
}

// ErrTooLarge is returned by Action when the message does not fit in an
// outbox row.
var ErrTooLarge = errors.New("notify: notification larger than an outbox row")

// Action is the outbox row of notification eventType about lease leaseID
// with payload, stamped now. LeaseID is left empty so that a failing
// notification never marks the lease degraded.
func (n *Notifier) Action(eventType, leaseID string, payload any, now time.Time) (outbox.Action, error) {
	m, err := NewMessage(n.cfg.PublisherID, eventType, payload, now)
	if err != nil {
		return outbox.Action{}, err
	}
	a := outbox.Action{Kind: KindLease, Key: Key(leaseID), Payload: m}
	if size := len(m.Payload) + 512; size > outbox.MaxPayload {
		return a, fmt.Errorf("%w: %s of lease %s is about %d bytes", ErrTooLarge, eventType, leaseID, size)
	}
	return a, nil
}

// keyShards is the number of outbox keys notifications are spread over.
const keyShards = 256

// Key is the outbox key of lease leaseID's notifications: one of
// keyShards keys, chosen by a hash of the id. One lease's notifications
// share a key, so they are published in the order they were decided
// (create before update before delete); other leases' are spread over
// the other keys and go out in parallel. The set of keys is bounded
// because the outbox keeps a lock row per key on MySQL. No compute action
// uses these keys, so a broker outage delays no compute call.
func Key(leaseID string) string {
	h := sha256.Sum256([]byte(leaseID))
	return fmt.Sprintf("notify:lease:%02x", int(h[0])%keyShards)
}

// wireMessage is the message as it goes on the wire: the Message and
// the _unique_id oslo.messaging's AMQP driver adds (its consumers drop
// repeats of a recent one). It is derived from the message id, so a
// repeated publish carries the same one.
func wireMessage(m Message) ([]byte, error) {
	w := struct {
		Message
		UniqueID string `json:"_unique_id"`
	}{m, strings.ReplaceAll(m.MessageID, "-", "")}
	return json.Marshal(w)
}

// Encode is the body of m as driver writes it: the 2.0 envelope for
// messagingv2, the bare message for messaging.
func Encode(m Message, driver string) ([]byte, error) {
	inner, err := wireMessage(m)
	if err != nil {
		return nil, err
	}
	if driver == DriverMessaging {
		return inner, nil
	}
	return json.Marshal(struct {
		Version string `json:"oslo.version"`
		Message string `json:"oslo.message"`
	}{envelopeVersion, string(inner)})
}

// RoutingKey is the routing key of a message of priority on topic.
func RoutingKey(topic, priority string) string { return topic + "." + strings.ToLower(priority) }

// Handlers are the outbox handlers of the notifications.
func (n *Notifier) Handlers() map[string]outbox.Handler {
	if n == nil {
		return nil
	}
	return map[string]outbox.Handler{KindLease: n.handle}
}

// handle publishes one stored message with every driver on every topic.
// A failure anywhere fails the whole row, which is published again in
// full later: a listener may then see a message twice, with the same
// message_id.
func (n *Notifier) handle(ctx context.Context, payload json.RawMessage) error {
	var m Message
	if err := json.Unmarshal(payload, &m); err != nil {
		return outbox.Permanent(fmt.Errorf("notify: stored message: %w", err))
	}
	if n.log {
		n.logger.InfoContext(ctx, "notification", "event_type", m.EventType, "message_id", m.MessageID,
			"publisher_id", m.PublisherID, "priority", m.Priority, "payload", string(m.Payload))
	}
	var bodies []Publishing
	for _, d := range []string{DriverMessagingV2, DriverMessaging} {
		if (d == DriverMessagingV2 && !n.v2) || (d == DriverMessaging && !n.v1) {
			continue
		}
		body, err := Encode(m, d)
		if err != nil {
			return outbox.Permanent(err)
		}
		for _, topic := range n.cfg.Topics {
			bodies = append(bodies, Publishing{RoutingKey: RoutingKey(topic, m.Priority), Body: body})
		}
	}
	if len(bodies) == 0 {
		return nil
	}
	return n.transport.Publish(ctx, bodies...)
}

// Topics are the topics published to.
func (n *Notifier) Topics() []string { return slices.Clone(n.cfg.Topics) }
