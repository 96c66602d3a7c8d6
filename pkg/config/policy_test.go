package config

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestOsloPolicy: the [oslo_policy] section from its defaults, an oslo
// INI file, YAML and the environment.
func TestOsloPolicy(t *testing.T) {
	for _, tt := range []struct {
		name string
		file string // name and text
		text string
		env  map[string]string
		want OsloPolicy
	}{
		{name: "defaults", want: OsloPolicy{EnforceNewDefaults: true}},
		{name: "ini", file: "blazar.conf",
			text: "[oslo_policy]\npolicy_file = /etc/blazar/policy.yaml\nenforce_new_defaults = False\nenforce_scope = True\n",
			want: OsloPolicy{PolicyFile: "/etc/blazar/policy.yaml", EnforceScope: true}},
		{name: "yaml", file: "leasehold.yaml",
			text: "oslo_policy:\n  policy_file: p.json\n  enforce_scope: true\n",
			want: OsloPolicy{PolicyFile: "p.json", EnforceNewDefaults: true, EnforceScope: true}},
		{name: "env", env: map[string]string{"LEASEHOLD_OSLO_POLICY_POLICY_FILE": "/x.yaml", "LEASEHOLD_OSLO_POLICY_ENFORCE_NEW_DEFAULTS": "false"},
			want: OsloPolicy{PolicyFile: "/x.yaml"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cleanEnv(t)
			for k, v := range tt.env {
				t.Setenv(k, v)
			}
			var args []string
			if tt.file != "" {
				args = []string{"--config", writeFile(t, tt.file, tt.text)}
			}
			c := mustLoad(t, args...)
			if diff := cmp.Diff(tt.want, c.OsloPolicy); diff != "" {
				t.Errorf("oslo_policy (-want +got):\n%s", diff)
			}
		})
	}
}
