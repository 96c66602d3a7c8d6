package blazar

import (
	"context"
	"testing"

	"github.com/leasehold/leasehold/pkg/auth"
	"github.com/leasehold/leasehold/pkg/errs"
)

func TestAuthorize(t *testing.T) {
	admin := &auth.Identity{UserID: "a", ProjectID: "admin", Roles: []string{"admin"}}
	member := &auth.Identity{UserID: "u", ProjectID: "p1", Roles: []string{"member"}}
	reader := &auth.Identity{UserID: "r", ProjectID: "p1", Roles: []string{"reader"}}
	nobody := &auth.Identity{UserID: "n", ProjectID: "p1"}
	tests := []struct {
		id     *auth.Identity
		rule   string
		target string
		ok     bool
	}{
		{admin, "blazar:oshosts:get", "", true},
		{admin, "blazar:leases:delete", "p9", true},
		{member, "blazar:oshosts:get", "", false},
		{member, "blazar:oshosts:post", "", false},
		{member, "blazar:leases:post", "", true},
		{member, "blazar:leases:get", "p1", true},
		{member, "blazar:leases:get", "p2", false},
		{member, "blazar:floatingips:get", "", true},
		{member, "blazar:floatingips:post", "", false},
		{reader, "blazar:leases:get", "p1", true},
		{reader, "blazar:leases:put", "p1", false},
		{nobody, "blazar:leases:get", "p1", false},
		{member, "blazar:plugins:get", "", false}, // unregistered: default rule
		{admin, "blazar:plugins:get", "", true},
		{nil, "blazar:leases:get", "", false},
	}
	for _, tt := range tests {
		ctx := context.Background()
		if tt.id != nil {
			ctx = auth.WithIdentity(ctx, tt.id)
		}
		err := authorize(ctx, tt.rule, tt.target)
		if (err == nil) != tt.ok {
			t.Errorf("%v %s target %q: err = %v, want ok=%v", tt.id, tt.rule, tt.target, err, tt.ok)
		}
		if e := errs.As(err); err != nil && (e == nil || e.Kind != errs.Forbidden || e.Msg != "Policy doesn't allow "+tt.rule+" to be performed.") {
			t.Errorf("error %#v", err)
		}
	}
}

func TestConfigurePolicy(t *testing.T) {
	t.Cleanup(func() { _ = ConfigurePolicy(nil) })
	member := auth.WithIdentity(context.Background(), &auth.Identity{UserID: "u", ProjectID: "p1", Roles: []string{"member"}})
	if err := ConfigurePolicy(map[string]string{"blazar:oshosts:get": "rule:admin or role:reader"}); err != nil {
		t.Fatal(err)
	}
	if err := authorize(member, "blazar:oshosts:get", ""); err != nil {
		t.Errorf("relaxed rule refused: %v", err)
	}
	if err := ConfigurePolicy(map[string]string{"blazar:oshosts:get": "not role:x"}); err == nil {
		t.Error("unsupported check string accepted")
	}
	if err := authorize(member, "blazar:oshosts:get", ""); err != nil {
		t.Errorf("a rejected configuration changed the policy: %v", err)
	}
	if err := ConfigurePolicy(map[string]string{"blazar:leases:get": "!"}); err != nil {
		t.Fatal(err)
	}
	if err := authorize(member, "blazar:leases:get", "p1"); err == nil {
		t.Error("\"!\" allowed")
	}
	if err := ConfigurePolicy(map[string]string{"blazar:leases:get": ""}); err != nil {
		t.Fatal(err)
	}
	if err := authorize(member, "blazar:leases:get", "p2"); err != nil {
		t.Errorf("empty rule refused: %v", err)
	}
}
