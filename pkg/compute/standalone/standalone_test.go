package standalone

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/leasehold/leasehold/pkg/compute"
	"github.com/leasehold/leasehold/pkg/errs"
)

func TestDescribeHost(t *testing.T) {
	tests := []struct {
		name     string
		body     map[string]string
		want     compute.HostDetails
		wantCaps map[string]string
		wantErr  bool // an errs.BadRequest
	}{
		{
			name:     "name only",
			body:     map[string]string{"name": "c1"},
			want:     compute.HostDetails{HypervisorHostname: "c1", ServiceName: "c1", CPUInfo: "{}"},
			wantCaps: map[string]string{},
		},
		{
			name: "details and capabilities",
			body: map[string]string{"name": "c1", "vcpus": "8", "memory_mb": "16384", "local_gb": "200", "hypervisor_type": "QEMU",
				"hypervisor_version": "2010001", "cpu_info": `{"arch": "x86_64"}`, "service_name": "svc", "availability_zone": "az1", "gpu": "true", "rack": "r1"},
			want: compute.HostDetails{HypervisorHostname: "c1", ServiceName: "svc", HypervisorType: "QEMU", HypervisorVersion: 2010001,
				CPUInfo: `{"arch": "x86_64"}`, AvailabilityZone: "az1", VCPUs: 8, MemoryMB: 16384, LocalGB: 200},
			wantCaps: map[string]string{"gpu": "true", "rack": "r1"},
		},
		{
			name:     "hypervisor_hostname wins, id accepted for name",
			body:     map[string]string{"id": "x", "hypervisor_hostname": "c9.example"},
			want:     compute.HostDetails{HypervisorHostname: "c9.example", ServiceName: "x", CPUInfo: "{}"},
			wantCaps: map[string]string{},
		},
		{name: "no name", body: map[string]string{"gpu": "1"}, wantErr: true},
		{name: "bad vcpus", body: map[string]string{"name": "c1", "vcpus": "eight"}, wantErr: true},
		{name: "negative memory", body: map[string]string{"name": "c1", "memory_mb": "-1"}, wantErr: true},
		{name: "cpu_info not JSON", body: map[string]string{"name": "c1", "cpu_info": "{x"}, wantErr: true},
	}
	d := New(nil)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, caps, err := d.DescribeHost(context.Background(), tt.body)
			if tt.wantErr {
				if !errs.Is(err, errs.BadRequest) {
					t.Fatalf("err = %v, want a bad request", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("details (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantCaps, caps); diff != "" {
				t.Errorf("caps (-want +got):\n%s", diff)
			}
		})
	}
}

func TestCallsRecorded(t *testing.T) {
	d := New(nil)
	ctx := context.Background()
	agg := compute.ReservationAggregate{ReservationID: "r1", ProjectID: "p1"}
	hosts := []string{"a", "b"}
	for _, err := range []error{
		d.AddToFreePool(ctx, hosts), d.RemoveFromFreePool(ctx, hosts), d.AddToReservation(ctx, agg, hosts),
		d.RemoveFromReservation(ctx, agg, hosts), d.CleanupServers(ctx, hosts),
	} {
		if err != nil {
			t.Fatal(err)
		}
	}
	hosts[0] = "mutated"
	want := []Call{
		{Op: "add_to_freepool", Hosts: []string{"a", "b"}},
		{Op: "remove_from_freepool", Hosts: []string{"a", "b"}},
		{Op: "add_to_reservation", ReservationID: "r1", ProjectID: "p1", Hosts: []string{"a", "b"}},
		{Op: "remove_from_reservation", ReservationID: "r1", ProjectID: "p1", Hosts: []string{"a", "b"}},
		{Op: "cleanup_servers", Hosts: []string{"a", "b"}},
	}
	if diff := cmp.Diff(want, d.Calls()); diff != "" {
		t.Errorf("calls (-want +got):\n%s", diff)
	}
	if s, err := d.ServersOnHost(ctx, "a"); err != nil || len(s) != 0 {
		t.Errorf("ServersOnHost = %v, %v", s, err)
	}
}

// TestRetriedCallsRecordedEachTime: a call run again (an outbox retry) is
// recorded again, so tests can count the effects.
func TestRetriedCallsRecordedEachTime(t *testing.T) {
	d := New(nil)
	ctx := context.Background()
	for range 2 {
		if err := d.AddToFreePool(ctx, []string{"a"}); err != nil {
			t.Fatal(err)
		}
	}
	want := []Call{{Op: "add_to_freepool", Hosts: []string{"a"}}, {Op: "add_to_freepool", Hosts: []string{"a"}}}
	if diff := cmp.Diff(want, d.Calls()); diff != "" {
		t.Errorf("calls (-want +got):\n%s", diff)
	}
}
