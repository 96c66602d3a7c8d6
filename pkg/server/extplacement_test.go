package server

import (
	"context"
	"net"
	"path/filepath"
	"strings"
	"testing"

	"github.com/leasehold/leasehold/pkg/config"
)

// TestExternalPlacementRefusesToStartWithout: a [placement] section that
// names an external Placement without the options to log in, or with a
// Keystone that cannot be reached, stops start-up with an error naming
// what is wrong; without it the built-in Placement serves and start-up
// goes on.
func TestExternalPlacementRefusesToStartWithout(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := "http://" + l.Addr().String() + "/v3"
	l.Close()
	for _, tc := range []struct {
		name string
		ext  config.ExternalPlacement
		want []string // nil: start-up succeeds
	}{
		{"not configured", config.ExternalPlacement{Timeout: 2}, nil},
		{"endpoint without a login", config.ExternalPlacement{EndpointOverride: "http://127.0.0.1:8778", Timeout: 2},
			[]string{"[placement]", "auth_url", "auth_type", "username", "password", "project_name", "user_domain_name", "project_domain_name"}},
		{"no keystone", config.ExternalPlacement{AuthType: "password", AuthURL: dead, Username: "blazar", Password: "x",
			ProjectName: "service", UserDomainName: "Default", ProjectDomainName: "Default", Timeout: 2},
			[]string{"logging in to Keystone", dead}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := config.Load(nil)
			if err != nil {
				t.Fatal(err)
			}
			cfg.Database = "sqlite:///" + filepath.Join(t.TempDir(), "t.db")
			cfg.Auth = config.AuthNoAuth
			cfg.Placement.ExternalPlacement = tc.ext
			s, err := New(context.Background(), cfg)
			if err == nil {
				_ = s.DB().Close()
			}
			switch {
			case tc.want == nil && err != nil:
				t.Fatalf("New: %v", err)
			case tc.want != nil && err == nil:
				t.Fatal("New succeeded")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not name %q", err, w)
				}
			}
		})
	}
}
