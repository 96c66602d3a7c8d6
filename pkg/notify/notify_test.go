package notify

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"pgregory.net/rapid"
)

func TestParseTransportURL(t *testing.T) {
	tests := []struct {
		in   string
		want *TransportURL
	}{
		{"rabbit://", &TransportURL{Scheme: "rabbit", VirtualHost: "/", Hosts: []Host{{Hostname: "localhost", Port: 5672}}}},
		{"rabbit://openstack:s3cr%40t@ctl1:5673/", &TransportURL{Scheme: "rabbit", VirtualHost: "/",
			Hosts: []Host{{Hostname: "ctl1", Port: 5673, Username: "openstack", Password: "s3cr@t"}}}},
		{"rabbit://u:p@h1:5672,u2:p:2@h2,h3:5674/blazar?ssl=1", &TransportURL{Scheme: "rabbit", VirtualHost: "blazar", TLS: true,
			Hosts: []Host{{Hostname: "h1", Port: 5672, Username: "u", Password: "p"}, {Hostname: "h2", Port: 5672, Username: "u2", Password: "p:2"}, {Hostname: "h3", Port: 5674}}}},
		{"rabbit://u:p@[::1]:5680/%2Fvh", &TransportURL{Scheme: "rabbit", VirtualHost: "/vh",
			Hosts: []Host{{Hostname: "::1", Port: 5680, Username: "u", Password: "p"}}}},
		{"rabbit://u:p@h1/", &TransportURL{Scheme: "rabbit", VirtualHost: "/", Hosts: []Host{{Hostname: "h1", Port: 5672, Username: "u", Password: "p"}}}},
	}
	for _, tt := range tests {
		got, err := ParseTransportURL(tt.in)
		if err != nil {
			t.Errorf("%s: %v", tt.in, err)
			continue
		}
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("%s (-want +got):\n%s", tt.in, diff)
		}
	}
	for _, bad := range []string{"", "ctl1:5672", "kafka://h1:9092", "rabbit://h1:notaport/", "rabbit://h1:0/", "rabbit://[::1/", "rabbit://h1/?ssl=maybe", "u:s3cr3t@ctl1://x"} {
		_, err := ParseTransportURL(bad)
		if err == nil {
			t.Errorf("%q: no error", bad)
		} else if strings.Contains(err.Error(), "s3cr") {
			t.Errorf("%q: error shows a password: %v", bad, err)
		}
	}
}

func TestFormatTimestamp(t *testing.T) {
	for in, want := range map[time.Time]string{
		time.Date(2026, 11, 25, 10, 35, 7, 0, time.UTC):                    "2026-11-25 10:35:07",
		time.Date(2026, 11, 25, 10, 35, 7, 120000, time.UTC):               "2026-11-25 10:35:07.000120",
		time.Date(2026, 11, 25, 10, 35, 7, 123456789, time.UTC):            "2026-11-25 10:35:07.123456",
		time.Date(2026, 11, 25, 11, 35, 7, 0, time.FixedZone("CET", 3600)): "2026-11-25 10:35:07",
	} {
		if got := FormatTimestamp(in); got != want {
			t.Errorf("FormatTimestamp(%v) = %q, want %q", in, got, want)
		}
	}
}

// TestEncodeEnvelope: messagingv2 writes exactly the two envelope keys,
// the message JSON-encoded as a string under oslo.message with the
// _unique_id derived from the message id; messaging writes the bare
// message.
func TestEncodeEnvelope(t *testing.T) {
	m := Message{MessageID: "0b5a1f9e-3f7e-4c57-9e43-1a2b3c4d5e6f", PublisherID: "blazar.lease", EventType: "lease.create",
		Priority: "INFO", Payload: json.RawMessage(`{"lease_id":"x"}`), Timestamp: "2026-11-25 10:35:07.000120"}
	body, err := Encode(m, DriverMessagingV2)
	if err != nil {
		t.Fatal(err)
	}
	var env map[string]any
	if err := json.Unmarshal(body, &env); err != nil {
		t.Fatal(err)
	}
	if len(env) != 2 || env["oslo.version"] != "2.0" {
		t.Fatalf("envelope %s", body)
	}
	inner, ok := env["oslo.message"].(string)
	if !ok {
		t.Fatalf("oslo.message is %T, want a JSON string", env["oslo.message"])
	}
	var got map[string]any
	if err := json.Unmarshal([]byte(inner), &got); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"message_id": m.MessageID, "publisher_id": "blazar.lease", "event_type": "lease.create", "priority": "INFO",
		"payload": map[string]any{"lease_id": "x"}, "timestamp": m.Timestamp, "_unique_id": "0b5a1f9e3f7e4c579e431a2b3c4d5e6f"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("message (-want +got):\n%s", diff)
	}
	v1, err := Encode(m, DriverMessaging)
	if err != nil {
		t.Fatal(err)
	}
	if string(v1) != inner {
		t.Errorf("messaging (1.0) body %s, want the bare message %s", v1, inner)
	}
	if k := RoutingKey("notifications", "INFO"); k != "notifications.info" {
		t.Errorf("routing key %q", k)
	}
}

// TestEnvelopeRoundTrip: whatever the payload, the envelope decodes back
// to the stored message.
func TestEnvelopeRoundTrip(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		payload := map[string]string{"name": rapid.String().Draw(t, "name")}
		m, err := NewMessage(rapid.StringMatching(`[a-z.]{1,20}`).Draw(t, "pub"), "lease.update", payload,
			time.Unix(rapid.Int64Range(0, 1<<33).Draw(t, "sec"), rapid.Int64Range(0, 999999999).Draw(t, "ns")))
		if err != nil {
			t.Fatal(err)
		}
		body, err := Encode(m, DriverMessagingV2)
		if err != nil {
			t.Fatal(err)
		}
		var env struct {
			Message string `json:"oslo.message"`
		}
		if err := json.Unmarshal(body, &env); err != nil {
			t.Fatal(err)
		}
		var back Message
		if err := json.Unmarshal([]byte(env.Message), &back); err != nil {
			t.Fatal(err)
		}
		var p map[string]string
		if err := json.Unmarshal(back.Payload, &p); err != nil {
			t.Fatal(err)
		}
		back.Payload = m.Payload
		if !cmp.Equal(back, m) || p["name"] != payload["name"] {
			t.Fatalf("round trip: %+v / %v, want %+v / %v", back, p, m, payload)
		}
	})
}

func TestNewChecksTheConfiguration(t *testing.T) {
	for _, tt := range []struct {
		cfg     Config
		wantNil bool
		wantErr string
	}{
		{Config{}, true, ""},
		{Config{Drivers: []string{"noop"}}, true, ""},
		{Config{Drivers: []string{"routing"}}, false, "not served"},
		{Config{Drivers: []string{"messagingv2"}}, false, "no transport_url"},
		{Config{Drivers: []string{"messaging"}, TransportURL: "kafka://h"}, false, "only rabbit"},
		{Config{Drivers: []string{"messagingv2", "log"}, TransportURL: "rabbit://h"}, false, ""},
		{Config{Drivers: []string{"log"}}, false, ""},
	} {
		n, err := New(tt.cfg)
		switch {
		case tt.wantErr != "":
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("%+v: err %v, want %q", tt.cfg, err, tt.wantErr)
			}
		case err != nil:
			t.Errorf("%+v: %v", tt.cfg, err)
		case tt.wantNil != (n == nil) || n.Enabled() == tt.wantNil:
			t.Errorf("%+v: notifier %v, want nil %v", tt.cfg, n, tt.wantNil)
		}
	}
}

// TestLogDriver: with only the log driver, the handler logs the
// notification and needs no broker.
func TestLogDriver(t *testing.T) {
	var buf bytes.Buffer
	n, err := New(Config{Drivers: []string{"log"}, Logger: slog.New(slog.NewJSONHandler(&buf, nil))})
	if err != nil {
		t.Fatal(err)
	}
	a, err := n.Action("lease.create", "L1", map[string]string{"lease_id": "L1"}, time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	if err != nil {
		t.Fatal(err)
	}
	if a.Kind != KindLease || a.Key != Key("L1") || !strings.HasPrefix(a.Key, "notify:lease:") || a.LeaseID != "" {
		t.Errorf("action %+v", a)
	}
	raw, err := json.Marshal(a.Payload)
	if err != nil {
		t.Fatal(err)
	}
	if err := n.Handlers()[KindLease](context.Background(), raw); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(buf.String(), `"event_type":"lease.create"`) || !strings.Contains(buf.String(), a.Payload.(Message).MessageID) {
		t.Errorf("log: %s", buf.String())
	}
	if err := n.Handlers()[KindLease](context.Background(), json.RawMessage(`"not a message"`)); err == nil {
		t.Error("a payload that is not a message was accepted")
	}
}

// TestActionRefusesOversizedPayloads: a payload beyond an outbox row is
// refused with ErrTooLarge (the lease service then drops the details).
func TestActionRefusesOversizedPayloads(t *testing.T) {
	n, err := New(Config{Drivers: []string{"log"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := n.Action("lease.create", "L1", strings.Repeat("x", 70000), time.Now()); err == nil || !strings.Contains(err.Error(), "larger") {
		t.Errorf("err %v, want ErrTooLarge", err)
	}
}

// TestPublishUnreachable: with no broker listening the publish fails
// (the outbox retries it) within the caller's deadline.
func TestPublishUnreachable(t *testing.T) {
	u, err := ParseTransportURL("rabbit://guest:guest@127.0.0.1:1,guest:guest@127.0.0.1:2/")
	if err != nil {
		t.Fatal(err)
	}
	tr := NewTransport(u, "openstack", false)
	defer tr.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	err = tr.Publish(ctx, Publishing{RoutingKey: "notifications.info", Body: []byte("{}")})
	if err == nil || !strings.Contains(err.Error(), "127.0.0.1:1") || !strings.Contains(err.Error(), "127.0.0.1:2") {
		t.Errorf("err %v, want both hosts tried", err)
	}
}

// TestKeyIsStableAndBounded: one lease always gets one key (its
// notifications stay in order), and all leases share at most keyShards
// keys (the outbox keeps a lock row per key on MySQL).
func TestKeyIsStableAndBounded(t *testing.T) {
	keys := map[string]bool{}
	for i := range 20000 {
		id := fmt.Sprintf("lease-%d", i)
		k := Key(id)
		if k != Key(id) {
			t.Fatalf("Key(%s) changes", id)
		}
		keys[k] = true
	}
	if len(keys) > keyShards || len(keys) < keyShards/2 {
		t.Errorf("%d keys for 20000 leases, want at most %d and spread", len(keys), keyShards)
	}
}
