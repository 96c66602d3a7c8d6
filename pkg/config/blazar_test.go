package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/spf13/pflag"
)

func TestBlazarDefaults(t *testing.T) {
	t.Setenv("LEASEHOLD_CONFIG", "")
	c, err := Load(pflag.NewFlagSet("x", pflag.ContinueOnError))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Blazar.Normalize(); err != nil {
		t.Fatal(err)
	}
	want := Blazar{
		Manager:      Manager{MinutesBeforeEndLease: 60, EventMaxRetries: 1},
		PhysicalHost: PhysicalHost{CleaningTime: -1, BigHostReservePercent: 15},
		Enforcement:  Enforcement{MaxLeaseDuration: -1},
		Events:       EventsManager{PollInterval: "1s", ClaimTimeout: "5m"},

		VirtualInstance: VirtualInstance{WholeHostReservePercent: 12},
	}
	if diff := cmp.Diff(want, c.Blazar); diff != "" {
		t.Errorf("defaults (-want +got):\n%s", diff)
	}
	if got := c.Blazar.HostCleaningMinutes(); got != 0 {
		t.Errorf("HostCleaningMinutes = %d, want 0", got)
	}
}

func TestBlazarFromBlazarConf(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "blazar.conf")
	conf := `[DEFAULT]
cleaning_time = 5

[manager]
minutes_before_end_lease = 30

[physical:host]
before_end = snapshot
cleaning_time = 10
failure_domains = rack, power
migration_classes = hv
allow_migration = hv:old::hv:new

[virtual:instance]
whole_host_reserve_percent = 25
policy_sizes = 2:4096:20, 4:8192:40,2:4096:20

[enforcement]
enabled_filters = MaxLeaseDurationFilter,ExternalServiceFilter
max_lease_duration = 86400
max_lease_duration_exempt_project_ids = p1, p2
external_service_base_endpoint = http://example.test/api/
external_service_on_end_endpoint = http://example.test/end
`
	if err := os.WriteFile(file, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("LEASEHOLD_CONFIG", file)
	c, err := Load(pflag.NewFlagSet("x", pflag.ContinueOnError))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Blazar.Normalize(); err != nil {
		t.Fatal(err)
	}
	want := Blazar{
		CleaningTime: 5,
		Manager:      Manager{MinutesBeforeEndLease: 30, EventMaxRetries: 1},
		PhysicalHost: PhysicalHost{CleaningTime: 10, BeforeEnd: "snapshot", FailureDomains: []string{"rack", "power"},
			MigrationClasses: []string{"hv"}, AllowMigration: []string{"hv:old::hv:new"}, BigHostReservePercent: 15},
		Enforcement: Enforcement{
			EnabledFilters:                   []string{"MaxLeaseDurationFilter", "ExternalServiceFilter"},
			MaxLeaseDuration:                 86400,
			MaxLeaseDurationExemptProjectIDs: []string{"p1", "p2"},
			ExternalServiceBaseEndpoint:      "http://example.test/api/",
			ExternalServiceOnEndEndpoint:     "http://example.test/end",
		},
		Events: EventsManager{PollInterval: "1s", ClaimTimeout: "5m"},

		VirtualInstance: VirtualInstance{WholeHostReservePercent: 25, PolicySizes: []string{"2:4096:20", "4:8192:40", "2:4096:20"},
			Sizes: []PolicySize{{VCPUs: 2, MemoryMB: 4096, DiskGB: 20}, {VCPUs: 4, MemoryMB: 8192, DiskGB: 40}}},
	}
	if diff := cmp.Diff(want, c.Blazar); diff != "" {
		t.Errorf("blazar.conf (-want +got):\n%s", diff)
	}
	if got := c.Blazar.HostCleaningMinutes(); got != 10 {
		t.Errorf("HostCleaningMinutes = %d, want 10", got)
	}
}

func TestBlazarNormalizeRejects(t *testing.T) {
	for _, b := range []Blazar{
		{PhysicalHost: PhysicalHost{BeforeEnd: "reboot"}},
		{PhysicalHost: PhysicalHost{AllowMigration: []string{"hv:old"}}},
		{PhysicalHost: PhysicalHost{AllowMigration: []string{"::hv:new"}}},
		{PhysicalHost: PhysicalHost{BigHostReservePercent: -1}},
		{PhysicalHost: PhysicalHost{BigHostReservePercent: 101}},
		{VirtualInstance: VirtualInstance{WholeHostReservePercent: -1}},
		{VirtualInstance: VirtualInstance{WholeHostReservePercent: 101}},
		{VirtualInstance: VirtualInstance{PolicySizes: []string{"2:4096"}}},
		{VirtualInstance: VirtualInstance{PolicySizes: []string{"2:4096:20, 0:1024:0"}}},
		{Enforcement: Enforcement{EnabledFilters: []string{"MaxReservationLengthFilter"}}},
	} {
		if err := b.Normalize(); err == nil {
			t.Errorf("Normalize(%+v) = nil, want an error", b)
		}
	}
}

// TestBlazarWholeHostReserveBounds: 0 (off) and 100 are accepted, the
// values just outside are not.
func TestBlazarWholeHostReserveBounds(t *testing.T) {
	for p, ok := range map[int]bool{-1: false, 0: true, 1: true, 100: true, 101: false} {
		b := Blazar{VirtualInstance: VirtualInstance{WholeHostReservePercent: p}}
		if err := b.Normalize(); (err == nil) != ok {
			t.Errorf("whole_host_reserve_percent %d: err = %v, want ok %v", p, err, ok)
		}
	}
}

func TestParsePolicySize(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want PolicySize
		err  string // a part of the error; "" for none
	}{
		{in: "2:4096:20", want: PolicySize{VCPUs: 2, MemoryMB: 4096, DiskGB: 20}},
		{in: " 1 : 512 : 0 ", want: PolicySize{VCPUs: 1, MemoryMB: 512}},
		{in: "2:4096", err: "want vcpus:memory_mb:disk_gb"},
		{in: "2:4096:20:1", err: "want vcpus:memory_mb:disk_gb"},
		{in: "2x:4096:20", err: "want vcpus:memory_mb:disk_gb"},
		{in: "2:-1:20", err: "want vcpus:memory_mb:disk_gb"},
		{in: "2:4096:99999999999", err: "want vcpus:memory_mb:disk_gb"},
		{in: "0:4096:20", err: "at least 1"},
		{in: "1:0:20", err: "at least 1"},
		{in: "", err: "want vcpus:memory_mb:disk_gb"},
	} {
		got, err := ParsePolicySize(tc.in)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) || !strings.Contains(err.Error(), "policy_sizes") {
				t.Errorf("ParsePolicySize(%q) = %v, %v; want an error containing %q", tc.in, got, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("ParsePolicySize(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
		}
	}
}
