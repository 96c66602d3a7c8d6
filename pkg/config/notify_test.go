package config

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/spf13/pflag"
)

func TestMessagingDefaults(t *testing.T) {
	t.Setenv("LEASEHOLD_CONFIG", "")
	c, err := Load(pflag.NewFlagSet("x", pflag.ContinueOnError))
	if err != nil {
		t.Fatal(err)
	}
	want := Messaging{ControlExchange: "openstack",
		OsloMessagingNotifications: OsloMessagingNotifications{Topics: []string{"notifications"}},
		Notifications:              Notifications{PublisherID: "blazar.lease"}}
	if diff := cmp.Diff(want, c.Messaging); diff != "" {
		t.Errorf("defaults (-want +got):\n%s", diff)
	}
}

// TestMessagingFromBlazarConf: blazar.conf's notification settings are
// read under their oslo names; [oslo_messaging_notifications]
// transport_url wins over [DEFAULT]'s for notifications.
func TestMessagingFromBlazarConf(t *testing.T) {
	file := filepath.Join(t.TempDir(), "blazar.conf")
	conf := `[DEFAULT]
transport_url = rabbit://openstack:pw@ctl1:5672,openstack:pw@ctl2:5672/
control_exchange = blazar

[oslo_messaging_notifications]
driver = messagingv2
topics = notifications, billing

[oslo_messaging_rabbit]
amqp_durable_queues = true

[notifications]
publisher_id = reservation.lease
`
	if err := os.WriteFile(file, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("LEASEHOLD_CONFIG", file)
	c, err := Load(pflag.NewFlagSet("x", pflag.ContinueOnError))
	if err != nil {
		t.Fatal(err)
	}
	want := Messaging{
		TransportURL:    "rabbit://openstack:pw@ctl1:5672,openstack:pw@ctl2:5672/",
		ControlExchange: "blazar",
		OsloMessagingNotifications: OsloMessagingNotifications{
			Driver: []string{"messagingv2"}, Topics: []string{"notifications", "billing"}},
		OsloMessagingRabbit: OsloMessagingRabbit{AMQPDurableQueues: true},
		Notifications:       Notifications{PublisherID: "reservation.lease"},
	}
	if diff := cmp.Diff(want, c.Messaging); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if got := c.Messaging.NotificationTransportURL(); got != want.TransportURL {
		t.Errorf("notification transport %q", got)
	}
	c.Messaging.OsloMessagingNotifications.TransportURL = "rabbit://n:pw@bus/"
	if got := c.Messaging.NotificationTransportURL(); got != "rabbit://n:pw@bus/" {
		t.Errorf("notification transport %q, want [oslo_messaging_notifications]'s", got)
	}
}
