package config

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
)

// Blazar holds the blazar.conf settings of the lease side, under the
// names blazar.conf gives them, so an existing blazar.conf can be read:
//
//	[DEFAULT] cleaning_time
//	[manager] minutes_before_end_lease, event_max_retries
//	[physical:host] cleaning_time, before_end, randomize_host_selection
//	                (and Leasehold's failure_domains, migration_classes,
//	                allow_migration)
//	[virtual:instance] Leasehold's whole_host_reserve_percent, policy_sizes
//	[enforcement] enabled_filters, max_lease_duration, …
//
// In YAML/TOML the same keys nest under manager:, "physical:host": and
// enforcement:; LEASEHOLD_MANAGER_MINUTES_BEFORE_END_LEASE and
// LEASEHOLD_ENFORCEMENT_* environment variables work too.
type Blazar struct {
	// CleaningTime is [DEFAULT] cleaning_time in minutes; [physical:host]
	// cleaning_time, when set, wins for host reservations.
	CleaningTime int           `mapstructure:"cleaning_time"`
	Manager      Manager       `mapstructure:"manager"`
	PhysicalHost PhysicalHost  `mapstructure:"physical:host"`
	Enforcement  Enforcement   `mapstructure:"enforcement"`
	Events       EventsManager `mapstructure:"events"`

	VirtualInstance VirtualInstance `mapstructure:"virtual:instance"`
}

// Manager is blazar.conf's [manager] section.
type Manager struct {
	// MinutesBeforeEndLease places the before_end_lease event when the
	// lease gives no before_end_date; 0 disables it.
	MinutesBeforeEndLease int `mapstructure:"minutes_before_end_lease"`
	// EventMaxRetries bounds the retries of an event whose lease is busy.
	EventMaxRetries int `mapstructure:"event_max_retries"`
}

// PhysicalHost is blazar.conf's [physical:host] section.
type PhysicalHost struct {
	// CleaningTime (minutes) is kept free before and after every host
	// reservation; -1 means "use [DEFAULT] cleaning_time".
	CleaningTime int `mapstructure:"cleaning_time"`
	// BeforeEnd is the action of before_end "default": "" or "snapshot".
	BeforeEnd string `mapstructure:"before_end"`
	// RandomizeHostSelection is accepted for compatibility; the allocator
	// is deterministic and ignores it.
	RandomizeHostSelection bool `mapstructure:"randomize_host_selection"`
	// ClusterTags are Ganeti-style cluster tags for the allocator
	// (Leasehold's, not blazar.conf's): htools:migration:x and
	// htools:allowmigration:y::z restrict the instance moves a
	// BEST-EFFORT lease may plan, with a host's tags being its extra
	// capabilities as "key:value"; htools:iextags:P makes the lease tags
	// starting with P exclusion tags (host choice spreads overlapping
	// leases sharing one over failure domains).
	ClusterTags []string `mapstructure:"cluster_tags"`
	// FailureDomains (Leasehold) are host fields or extra capabilities
	// naming failure domains, e.g. "rack, power": a reservation's hosts
	// are spread over the values (Ganeti's htools:nlocation:rack).
	FailureDomains []string `mapstructure:"failure_domains"`
	// MigrationClasses (Leasehold) are host fields or extra capabilities
	// naming migration classes (Ganeti's htools:migration:x): healing
	// moves a reservation only to a host of the same classes, or one that
	// AllowMigration lets receive them.
	MigrationClasses []string `mapstructure:"migration_classes"`
	// AllowMigration (Leasehold) lists "key:from::key:to" permissions
	// (Ganeti's htools:allowmigration:from::to).
	AllowMigration []string `mapstructure:"allow_migration"`
	// BigHostReservePercent (Leasehold) keeps this share of the bigger
	// hosts (a bigger size class than a request needs) free for the
	// requests only they can serve: a request takes a bigger host only
	// while more than that many stay free in its window. 0 turns it off.
	BigHostReservePercent int `mapstructure:"big_host_reserve_percent"`
}

// VirtualInstance is the [virtual:instance] section (the instance
// reservation plugin's, named after its resource type as [physical:host]
// is).
type VirtualInstance struct {
	// WholeHostReservePercent (Leasehold) keeps this share of the hosts
	// matching an instance reservation whole for whole-host requests: a
	// reservation of slots smaller than a whole host takes a host
	// entirely free in its window only while more than that many are.
	// 0 turns it off.
	WholeHostReservePercent int `mapstructure:"whole_host_reserve_percent"`
	// PolicySizes (Leasehold) are the instance sizes the allocator keeps
	// room for (the policy intervals of its lost-allocations metric), as
	// "vcpus:memory_mb:disk_gb" entries, e.g. "2:4096:20, 4:8192:40";
	// empty: the sizes of the instance reservations in use. Normalize
	// reads them into Sizes.
	PolicySizes []string `mapstructure:"policy_sizes"`
	// Sizes are PolicySizes read.
	Sizes []PolicySize `mapstructure:"-"`
}

// PolicySize is one instance size of [virtual:instance] policy_sizes.
type PolicySize struct{ VCPUs, MemoryMB, DiskGB int64 }

// ParsePolicySize reads one "vcpus:memory_mb:disk_gb" entry (vcpus and
// memory_mb at least 1, disk_gb at least 0).
func ParsePolicySize(s string) (PolicySize, error) {
	bad := fmt.Errorf("config: virtual:instance.policy_sizes entry %q: want vcpus:memory_mb:disk_gb, e.g. 2:4096:20", s)
	parts := strings.Split(strings.TrimSpace(s), ":")
	if len(parts) != 3 {
		return PolicySize{}, bad
	}
	var n [3]int64
	for i, p := range parts {
		v, err := strconv.ParseInt(strings.TrimSpace(p), 10, 64)
		if err != nil || v < 0 || v > math.MaxInt32 {
			return PolicySize{}, bad
		}
		n[i] = v
	}
	if n[0] < 1 || n[1] < 1 {
		return PolicySize{}, fmt.Errorf("config: virtual:instance.policy_sizes entry %q: vcpus and memory_mb must be at least 1", s)
	}
	return PolicySize{VCPUs: n[0], MemoryMB: n[1], DiskGB: n[2]}, nil
}

// ParsePolicySizes reads policy_sizes entries (each may itself be a
// comma-separated list), dropping repeats.
func ParsePolicySizes(entries []string) ([]PolicySize, error) {
	var out []PolicySize
	for _, e := range splitList(entries) {
		if strings.TrimSpace(e) == "" {
			continue
		}
		ps, err := ParsePolicySize(e)
		if err != nil {
			return nil, err
		}
		if !slices.Contains(out, ps) {
			out = append(out, ps)
		}
	}
	return out, nil
}

// Enforcement is blazar.conf's [enforcement] section.
type Enforcement struct {
	// EnabledFilters lists MaxLeaseDurationFilter and/or
	// ExternalServiceFilter.
	EnabledFilters []string `mapstructure:"enabled_filters"`
	// MaxLeaseDuration is in seconds; -1 means no limit.
	MaxLeaseDuration                 int      `mapstructure:"max_lease_duration"`
	MaxLeaseDurationExemptProjectIDs []string `mapstructure:"max_lease_duration_exempt_project_ids"`
	// ExternalServiceBaseEndpoint gets check-create, check-update and
	// on-end appended unless the per-call endpoint is set.
	ExternalServiceBaseEndpoint        string `mapstructure:"external_service_base_endpoint"`
	ExternalServiceCheckCreateEndpoint string `mapstructure:"external_service_check_create_endpoint"`
	ExternalServiceCheckUpdateEndpoint string `mapstructure:"external_service_check_update_endpoint"`
	ExternalServiceOnEndEndpoint       string `mapstructure:"external_service_on_end_endpoint"`
	ExternalServiceToken               string `mapstructure:"external_service_token"`
}

// EventsManager tunes Leasehold's event manager (not in blazar.conf).
type EventsManager struct {
	// PollInterval bounds how late an event created by another process
	// is seen (at most 1s is enforced).
	PollInterval string `mapstructure:"poll_interval"`
	// ClaimTimeout is how long an IN_PROGRESS event, or a claimed outbox
	// action, may stay claimed before another process takes it back (its
	// claimant is presumed dead). An outbox action's call is cut off at
	// half of it.
	ClaimTimeout string `mapstructure:"claim_timeout"`
}

func init() {
	for k, v := range map[string]any{
		"cleaning_time":                                      0,
		"manager.minutes_before_end_lease":                   60,
		"manager.event_max_retries":                          1,
		"physical:host.cleaning_time":                        -1,
		"physical:host.before_end":                           "",
		"physical:host.randomize_host_selection":             false,
		"physical:host.cluster_tags":                         []string{},
		"physical:host.failure_domains":                      []string{},
		"physical:host.migration_classes":                    []string{},
		"physical:host.allow_migration":                      []string{},
		"physical:host.big_host_reserve_percent":             15, // allocator.DefaultReservePercent
		"virtual:instance.whole_host_reserve_percent":        12, // allocator.DefaultWholeReservePercent
		"virtual:instance.policy_sizes":                      []string{},
		"enforcement.enabled_filters":                        []string{},
		"enforcement.max_lease_duration":                     -1,
		"enforcement.max_lease_duration_exempt_project_ids":  []string{},
		"enforcement.external_service_base_endpoint":         "",
		"enforcement.external_service_check_create_endpoint": "",
		"enforcement.external_service_check_update_endpoint": "",
		"enforcement.external_service_on_end_endpoint":       "",
		"enforcement.external_service_token":                 "",
		"events.poll_interval":                               "1s",
		"events.claim_timeout":                               "5m",
	} {
		defaults[k] = v
	}
}

// HostCleaningMinutes is the cleaning time host reservations use.
func (b *Blazar) HostCleaningMinutes() int {
	if b.PhysicalHost.CleaningTime >= 0 {
		return b.PhysicalHost.CleaningTime
	}
	return b.CleaningTime
}

// Normalize splits list values given as one comma-separated string (env,
// INI) and checks the enumerated values.
func (b *Blazar) Normalize() error {
	b.Enforcement.EnabledFilters = splitList(b.Enforcement.EnabledFilters)
	b.PhysicalHost.ClusterTags = splitList(b.PhysicalHost.ClusterTags)
	b.Enforcement.MaxLeaseDurationExemptProjectIDs = splitList(b.Enforcement.MaxLeaseDurationExemptProjectIDs)
	b.PhysicalHost.FailureDomains = splitList(b.PhysicalHost.FailureDomains)
	b.PhysicalHost.MigrationClasses = splitList(b.PhysicalHost.MigrationClasses)
	b.PhysicalHost.AllowMigration = splitList(b.PhysicalHost.AllowMigration)
	if p := b.PhysicalHost.BigHostReservePercent; p < 0 || p > 100 {
		return fmt.Errorf("config: physical:host.big_host_reserve_percent %d: want 0..100", p)
	}
	if p := b.VirtualInstance.WholeHostReservePercent; p < 0 || p > 100 {
		return fmt.Errorf("config: virtual:instance.whole_host_reserve_percent %d: want 0..100", p)
	}
	b.VirtualInstance.PolicySizes = splitList(b.VirtualInstance.PolicySizes)
	sizes, err := ParsePolicySizes(b.VirtualInstance.PolicySizes)
	if err != nil {
		return err
	}
	b.VirtualInstance.Sizes = sizes
	for _, r := range b.PhysicalHost.AllowMigration {
		from, to, ok := strings.Cut(r, "::")
		if !ok || from == "" || to == "" || strings.Contains(to, "::") {
			return fmt.Errorf("config: physical:host.allow_migration %q: want from::to, e.g. hv:old::hv:new", r)
		}
	}
	switch b.PhysicalHost.BeforeEnd {
	case "", "snapshot":
	default:
		return fmt.Errorf("config: physical:host.before_end %q: want \"\" or snapshot", b.PhysicalHost.BeforeEnd)
	}
	for _, f := range b.Enforcement.EnabledFilters {
		switch f {
		case "MaxLeaseDurationFilter", "ExternalServiceFilter":
		default:
			return fmt.Errorf("config: enforcement.enabled_filters: unknown filter %q (known: MaxLeaseDurationFilter, ExternalServiceFilter)", f)
		}
	}
	return nil
}
