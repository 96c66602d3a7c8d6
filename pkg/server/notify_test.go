package server

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/leasehold/leasehold/pkg/config"
)

// TestNotifierFromConfig: [oslo_messaging_notifications] builds the
// notifier (none for noop or no driver); an unknown driver or a bad
// transport_url stops start-up with a message naming it, and without
// showing the password.
func TestNotifierFromConfig(t *testing.T) {
	for _, tc := range []struct {
		driver, url string
		want        bool
		err         string
	}{
		{"", "", false, ""},
		{"noop", "", false, ""},
		{"messagingv2", "rabbit://u:pw@127.0.0.1:1/", true, ""},
		{"messaging", "rabbit://u:pw@127.0.0.1:1/", true, ""},
		{"routing", "", false, `driver "routing"`},
		{"messagingv2", "", false, "no transport_url"},
		{"messagingv2", "amqp://u:secretpw@h/", false, "only rabbit"},
		{"messagingv2", "rabbit://u:secretpw@h:port/", false, "port"},
	} {
		cfg, err := config.Load(nil)
		if err != nil {
			t.Fatal(err)
		}
		cfg.Database = "sqlite:///" + filepath.Join(t.TempDir(), "t.db")
		cfg.Auth = config.AuthNoAuth
		if tc.driver != "" {
			cfg.Messaging.OsloMessagingNotifications.Driver = []string{tc.driver}
		}
		cfg.Messaging.TransportURL = tc.url
		s, err := New(context.Background(), cfg)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) || strings.Contains(err.Error(), "secretpw") {
				t.Errorf("%s %s: err %v, want one naming %q without the password", tc.driver, tc.url, err, tc.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s %s: %v", tc.driver, tc.url, err)
			continue
		}
		if got := s.Notifier != nil; got != tc.want {
			t.Errorf("%s %s: notifier %v, want %v", tc.driver, tc.url, got, tc.want)
		}
		_ = s.DB().Close()
	}
}
