package notify

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

// Publishing is one message to publish: its routing key and body.
type Publishing struct {
	RoutingKey string
	Body       []byte
}

// dialTimeout bounds a connection attempt to one broker when the
// caller's context has no earlier deadline.
const dialTimeout = 10 * time.Second

// Transport publishes to RabbitMQ over AMQP 0-9-1 with publisher
// confirms. It holds one connection and one confirm-mode channel, opened
// on first use and again after any failure (trying the URL's hosts in
// turn, starting with the one after the host that failed). It is safe
// for concurrent use: publishes from several goroutines share the
// channel and wait for their own confirms.
type Transport struct {
	url      *TransportURL
	exchange string
	durable  bool

	mu       sync.Mutex
	conn     *amqp.Connection
	ch       *amqp.Channel
	declared map[string]bool // routing keys whose queue is declared on ch
	next     int             // the host to try first
	closed   bool
}

// NewTransport returns a transport for u that publishes to exchange.
func NewTransport(u *TransportURL, exchange string, durable bool) *Transport {
	return &Transport{url: u, exchange: exchange, durable: durable}
}

// Publish publishes ps in order and returns once the broker has
// confirmed every one of them (nil), or with the first failure: a
// connection that cannot be opened, a declaration or publish refused, a
// negative confirm, or ctx ending first. After a failure the connection
// is dropped and the next call opens a new one.
func (t *Transport) Publish(ctx context.Context, ps ...Publishing) error {
	ch, err := t.channel(ctx, ps)
	if err != nil {
		return err
	}
	confirms := make([]*amqp.DeferredConfirmation, 0, len(ps))
	for _, p := range ps {
		dc, err := ch.PublishWithDeferredConfirmWithContext(ctx, t.exchange, p.RoutingKey, false, false, amqp.Publishing{
			ContentType:     "application/json",
			ContentEncoding: "utf-8",
			DeliveryMode:    amqp.Persistent,
			Body:            p.Body,
		})
		if err != nil {
			t.drop(ch)
			return fmt.Errorf("notify: publish to %s with key %s: %w", t.exchange, p.RoutingKey, err)
		}
		confirms = append(confirms, dc)
	}
	for i, dc := range confirms {
		ack, err := dc.WaitContext(ctx)
		if err != nil {
			t.drop(ch)
			return fmt.Errorf("notify: waiting for the broker's confirm of %s: %w", ps[i].RoutingKey, err)
		}
		if !ack {
			t.drop(ch)
			return fmt.Errorf("notify: the broker did not take the message for %s (negative confirm or channel closed)", ps[i].RoutingKey)
		}
	}
	return nil
}

// channel returns the open channel, with the exchange and the queues of
// ps's routing keys declared on it, opening a connection if needed.
func (t *Transport) channel(ctx context.Context, ps []Publishing) (*amqp.Channel, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return nil, errors.New("notify: transport closed")
	}
	if t.ch != nil && (t.ch.IsClosed() || t.conn.IsClosed()) {
		t.closeLocked()
	}
	if t.ch == nil {
		if err := t.openLocked(ctx); err != nil {
			return nil, err
		}
	}
	for _, p := range ps {
		if t.declared[p.RoutingKey] {
			continue
		}
		// oslo.messaging declares a queue named after the routing key
		// before it publishes a notification, so that none is lost
		// while no listener has declared it yet.
		if _, err := t.ch.QueueDeclare(p.RoutingKey, t.durable, false, false, false, nil); err != nil {
			t.closeLocked()
			return nil, fmt.Errorf("notify: declare queue %s: %w", p.RoutingKey, err)
		}
		if err := t.ch.QueueBind(p.RoutingKey, p.RoutingKey, t.exchange, false, nil); err != nil {
			t.closeLocked()
			return nil, fmt.Errorf("notify: bind queue %s to exchange %s: %w", p.RoutingKey, t.exchange, err)
		}
		t.declared[p.RoutingKey] = true
	}
	return t.ch, nil
}

// openLocked connects to the first host that answers, starting at
// t.next, and opens a confirm-mode channel with the exchange declared.
func (t *Transport) openLocked(ctx context.Context) error {
	var errs []error
	n := len(t.url.Hosts)
	for i := range n {
		if err := ctx.Err(); err != nil {
			errs = append(errs, err)
			break
		}
		h := t.url.Hosts[(t.next+i)%n]
		conn, err := t.dial(ctx, h)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", h.Addr(), err))
			continue
		}
		ch, err := openChannel(conn, t.exchange, t.durable)
		if err != nil {
			_ = conn.CloseDeadline(time.Now().Add(2 * time.Second))
			errs = append(errs, fmt.Errorf("%s: %w", h.Addr(), err))
			continue
		}
		// After a failure on this host the next attempt starts at the
		// one after it.
		t.next = (t.next + i + 1) % n
		t.conn, t.ch, t.declared = conn, ch, map[string]bool{}
		slog.InfoContext(ctx, "notify: connected to the message bus", "host", h.Addr(), "vhost", t.url.VirtualHost)
		return nil
	}
	return fmt.Errorf("notify: no message broker reachable: %w", errors.Join(errs...))
}

func (t *Transport) dial(ctx context.Context, h Host) (*amqp.Connection, error) {
	timeout := dialTimeout
	if dl, ok := ctx.Deadline(); ok {
		timeout = min(timeout, max(time.Until(dl), time.Millisecond))
	}
	user, pass := h.Username, h.Password
	if user == "" && pass == "" {
		user, pass = "guest", "guest"
	}
	cfg := amqp.Config{
		SASL:      []amqp.Authentication{&amqp.PlainAuth{Username: user, Password: pass}},
		Vhost:     t.url.VirtualHost,
		Heartbeat: 10 * time.Second,
		Locale:    "en_US",
		Dial:      amqp.DefaultDial(timeout),
		Properties: amqp.Table{
			"product":         "leasehold",
			"connection_name": "leasehold notifier",
		},
	}
	scheme := "amqp"
	if t.url.TLS {
		scheme = "amqps"
		cfg.TLSClientConfig = &tls.Config{ServerName: h.Hostname, MinVersion: tls.VersionTLS12}
	}
	return amqp.DialConfig(scheme+"://"+h.Addr()+"/", cfg)
}

// openChannel opens a channel in confirm mode and declares the topic
// exchange as oslo.messaging does (durable per amqp_durable_queues, never
// auto-deleted).
func openChannel(conn *amqp.Connection, exchange string, durable bool) (*amqp.Channel, error) {
	ch, err := conn.Channel()
	if err != nil {
		return nil, fmt.Errorf("open channel: %w", err)
	}
	if err := ch.Confirm(false); err != nil {
		return nil, fmt.Errorf("confirm mode: %w", err)
	}
	if err := ch.ExchangeDeclare(exchange, amqp.ExchangeTopic, durable, false, false, false, nil); err != nil {
		return nil, fmt.Errorf("declare exchange %s: %w", exchange, err)
	}
	return ch, nil
}

// drop closes the connection if ch is still its channel (another
// goroutine may have replaced it already).
func (t *Transport) drop(ch *amqp.Channel) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.ch == ch {
		t.closeLocked()
	}
}

func (t *Transport) closeLocked() {
	if t.conn != nil {
		_ = t.conn.CloseDeadline(time.Now().Add(2 * time.Second))
	}
	t.conn, t.ch, t.declared = nil, nil, nil
}

// Close closes the connection; later publishes fail.
func (t *Transport) Close() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.closed = true
	t.closeLocked()
	return nil
}
