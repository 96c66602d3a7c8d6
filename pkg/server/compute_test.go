package server

import (
	"context"
	"net"
	"path/filepath"
	"strings"
	"testing"

	"github.com/leasehold/leasehold/pkg/config"
)

// TestNovaDriverRefusesToStartWithout: compute driver nova without its
// [nova] options, or with a Keystone that cannot be reached, stops
// start-up with an error naming what is wrong.
func TestNovaDriverRefusesToStartWithout(t *testing.T) {
	// A port nothing listens on: bind one, then close it.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := "http://" + l.Addr().String() + "/v3"
	l.Close()
	for _, tc := range []struct {
		name string
		edit func(*config.Nova)
		want []string
	}{
		{"no options", func(*config.Nova) {}, []string{"[nova]", "auth_type", "auth_url", "username", "password", "project_name", "user_domain_name", "project_domain_name"}},
		{"no keystone", func(n *config.Nova) {
			*n = config.Nova{AuthType: "password", AuthURL: dead, Username: "blazar", Password: "x", ProjectName: "service",
				UserDomainName: "Default", ProjectDomainName: "Default", EndpointType: "public", Timeout: 2,
				AggregateFreepoolName: "freepool", BlazarOwner: "blazar:owner", ServerDeleteTimeout: 60}
		}, []string{"logging in to Keystone", dead}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := config.Load(nil)
			if err != nil {
				t.Fatal(err)
			}
			cfg.Database = "sqlite:///" + filepath.Join(t.TempDir(), "t.db")
			cfg.Auth = config.AuthNoAuth
			cfg.Compute.Driver = config.ComputeNova
			tc.edit(&cfg.Nova)
			s, err := New(context.Background(), cfg)
			if err == nil {
				_ = s.DB().Close()
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
