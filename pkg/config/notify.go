package config

// Messaging holds the oslo.messaging settings of the usage notifications,
// under the names blazar.conf gives them:
//
//	[DEFAULT] transport_url, control_exchange
//	[oslo_messaging_notifications] driver, topics, transport_url
//	[oslo_messaging_rabbit] amqp_durable_queues
//	[notifications] publisher_id
//
// In YAML/TOML the sections nest the same way; LEASEHOLD_TRANSPORT_URL and
// LEASEHOLD_OSLO_MESSAGING_NOTIFICATIONS_DRIVER work too.
type Messaging struct {
	// TransportURL is [DEFAULT] transport_url, the bus for everything;
	// [oslo_messaging_notifications] transport_url, when set, wins for
	// notifications (as oslo.messaging's get_notification_transport).
	TransportURL string `mapstructure:"transport_url"`
	// ControlExchange is [DEFAULT] control_exchange: the exchange the
	// notifications are published to (oslo.messaging's default,
	// "openstack"; Blazar does not change it).
	ControlExchange            string                     `mapstructure:"control_exchange"`
	OsloMessagingNotifications OsloMessagingNotifications `mapstructure:"oslo_messaging_notifications"`
	OsloMessagingRabbit        OsloMessagingRabbit        `mapstructure:"oslo_messaging_rabbit"`
	Notifications              Notifications              `mapstructure:"notifications"`
}

// OsloMessagingNotifications is the [oslo_messaging_notifications]
// section.
type OsloMessagingNotifications struct {
	// Driver lists the notification drivers: messagingv2 (the 2.0
	// envelope), messaging (1.0, no envelope), log, noop. Empty or noop
	// sends nothing.
	Driver []string `mapstructure:"driver"`
	// Topics are the topics published to (routing key topic.priority).
	Topics []string `mapstructure:"topics"`
	// TransportURL overrides [DEFAULT] transport_url for notifications.
	TransportURL string `mapstructure:"transport_url"`
}

// OsloMessagingRabbit is the part of [oslo_messaging_rabbit] the notifier
// reads.
type OsloMessagingRabbit struct {
	// AMQPDurableQueues declares the exchange and the default queues
	// durable (the listeners must agree, as with oslo.messaging).
	AMQPDurableQueues bool `mapstructure:"amqp_durable_queues"`
}

// Notifications is blazar.conf's [notifications] section.
type Notifications struct {
	// PublisherID is the publisher_id of every notification.
	PublisherID string `mapstructure:"publisher_id"`
}

// NotificationTransportURL is the transport URL notifications use.
func (m *Messaging) NotificationTransportURL() string {
	if u := m.OsloMessagingNotifications.TransportURL; u != "" {
		return u
	}
	return m.TransportURL
}

// Normalize splits list values given as one comma-separated string (env,
// INI).
func (m *Messaging) Normalize() {
	m.OsloMessagingNotifications.Driver = splitList(m.OsloMessagingNotifications.Driver)
	m.OsloMessagingNotifications.Topics = splitList(m.OsloMessagingNotifications.Topics)
}

func init() {
	for k, v := range map[string]any{
		"transport_url":                              "",
		"control_exchange":                           "openstack",
		"oslo_messaging_notifications.driver":        []string{},
		"oslo_messaging_notifications.topics":        []string{"notifications"},
		"oslo_messaging_notifications.transport_url": "",
		"oslo_messaging_rabbit.amqp_durable_queues":  false,
		"notifications.publisher_id":                 "blazar.lease",
	} {
		defaults[k] = v
	}
}
