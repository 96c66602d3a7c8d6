package main

import (
	"bytes"
	"encoding/json"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func boolp(b bool) *bool { return &b }

func TestBuildVersion(t *testing.T) {
	deps := []*debug.Module{
		{Path: "gorm.io/gorm", Version: "v1.31.2"},
		{Path: "modernc.org/sqlite", Version: "v1.56.0"},
		{Path: "github.com/go-sql-driver/mysql", Version: "v1.8.1", Replace: &debug.Module{Path: "example.org/fork/mysql", Version: "v1.8.2"}},
		{Path: "github.com/spf13/pflag", Version: "v1.0.10"}, // not one that matters: left out
		nil,
	}
	for _, tc := range []struct {
		name    string
		version string
		bi      *debug.BuildInfo
		ok      bool
		want    versionInfo
	}{
		{
			name: "no build info", version: "1.2.3", ok: false,
			want: versionInfo{Version: "1.2.3", GoVersion: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH, Dependencies: map[string]string{}},
		},
		{
			name: "git build, clean", version: "v0.3.0-5-gabc", ok: true,
			bi: &debug.BuildInfo{
				GoVersion: "go1.26.0", Path: "github.com/leasehold/leasehold/cmd/leasehold",
				Main: debug.Module{Path: "github.com/leasehold/leasehold", Version: "(devel)"},
				Deps: deps,
				Settings: []debug.BuildSetting{
					{Key: "CGO_ENABLED", Value: "0"}, {Key: "vcs", Value: "git"},
					{Key: "vcs.revision", Value: "4a57c8a0b2e33b6df376c6a5da52bf755bec4061"},
					{Key: "vcs.time", Value: "2026-11-25T08:08:51Z"}, {Key: "vcs.modified", Value: "false"},
				},
			},
			want: versionInfo{
				Version: "v0.3.0-5-gabc", GoVersion: "go1.26.0", Platform: runtime.GOOS + "/" + runtime.GOARCH,
				Path: "github.com/leasehold/leasehold/cmd/leasehold", Module: "github.com/leasehold/leasehold", ModuleVersion: "(devel)",
				VCS: "git", Revision: "4a57c8a0b2e33b6df376c6a5da52bf755bec4061", Time: "2026-11-25T08:08:51Z",
				Modified: boolp(false), CGOEnabled: boolp(false),
				Dependencies: map[string]string{
					"gorm.io/gorm":                   "v1.31.2",
					"modernc.org/sqlite":             "v1.56.0",
					"github.com/go-sql-driver/mysql": "v1.8.1 => example.org/fork/mysql v1.8.2",
				},
			},
		},
		{
			name: "go install at a tag: module version replaces the dev default", version: "0.1.0-dev", ok: true,
			bi: &debug.BuildInfo{
				GoVersion: "go1.26.1", Main: debug.Module{Path: "github.com/leasehold/leasehold", Version: "v1.4.0"},
				Settings: []debug.BuildSetting{{Key: "CGO_ENABLED", Value: "1"}, {Key: "vcs.modified", Value: "true"}},
			},
			want: versionInfo{
				Version: "v1.4.0", GoVersion: "go1.26.1", Platform: runtime.GOOS + "/" + runtime.GOARCH,
				Module: "github.com/leasehold/leasehold", ModuleVersion: "v1.4.0",
				Modified: boolp(true), CGOEnabled: boolp(true), Dependencies: map[string]string{},
			},
		},
		{
			name: "a version given with -X wins over the module version", version: "2.0.0", ok: true,
			bi: &debug.BuildInfo{GoVersion: "go1.26.1", Main: debug.Module{Path: "github.com/leasehold/leasehold", Version: "v1.4.0"}},
			want: versionInfo{
				Version: "2.0.0", GoVersion: "go1.26.1", Platform: runtime.GOOS + "/" + runtime.GOARCH,
				Module: "github.com/leasehold/leasehold", ModuleVersion: "v1.4.0", Dependencies: map[string]string{},
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := buildVersion(tc.version, tc.bi, tc.ok)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("buildVersion (-want +got):\n%s", diff)
			}
		})
	}
}

func TestVersionText(t *testing.T) {
	v := versionInfo{
		Version: "1.0.0", GoVersion: "go1.26.0", Platform: "linux/amd64",
		Module: "github.com/leasehold/leasehold", ModuleVersion: "(devel)",
		Revision: "abc123", Time: "2026-11-25T08:08:51Z", Modified: boolp(true), CGOEnabled: boolp(false),
		Dependencies: map[string]string{"gorm.io/gorm": "v1.31.2", "modernc.org/sqlite": "v1.56.0"},
	}
	var b bytes.Buffer
	if err := v.writeText(&b); err != nil {
		t.Fatal(err)
	}
	want := `leasehold 1.0.0
  go:        go1.26.0 linux/amd64
  module:    github.com/leasehold/leasehold (devel)
  revision:  abc123 (modified)
  time:      2026-11-25T08:08:51Z
  cgo:       false
  gorm.io/gorm v1.31.2
  modernc.org/sqlite v1.56.0
`
	if diff := cmp.Diff(want, b.String()); diff != "" {
		t.Errorf("text (-want +got):\n%s", diff)
	}

	b.Reset()
	if err := (versionInfo{Version: "1.0.0", GoVersion: "go1.26.0", Platform: "linux/amd64"}).writeText(&b); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "revision:  unknown") {
		t.Errorf("no revision is not said:\n%s", b.String())
	}
}

// TestVersionCommand runs the command on this test binary's own build
// information, which lists the linked modules (but no VCS stamp: go test
// does not add one; tests/packaging_test.go checks that on a real build).
func TestVersionCommand(t *testing.T) {
	var out, errb bytes.Buffer
	if err := run([]string{"version", "--json"}, nil, &out, &errb); err != nil {
		t.Fatalf("version --json: %v (%s)", err, errb.String())
	}
	var v versionInfo
	dec := json.NewDecoder(&out)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("version --json is not one JSON object: %v", err)
	}
	if v.Version == "" || v.GoVersion != runtime.Version() || v.Module != "github.com/leasehold/leasehold" {
		t.Errorf("version --json = %+v", v)
	}
	for _, p := range []string{"gorm.io/gorm", "modernc.org/sqlite", "github.com/libtnb/sqlite", "github.com/go-sql-driver/mysql", "gorm.io/driver/mysql"} {
		if !strings.HasPrefix(v.Dependencies[p], "v") {
			t.Errorf("dependency %s: version %q", p, v.Dependencies[p])
		}
	}

	out.Reset()
	if err := run([]string{"version"}, nil, &out, &errb); err != nil {
		t.Fatal(err)
	}
	first, _, _ := strings.Cut(out.String(), "\n")
	if first != "leasehold "+v.Version {
		t.Errorf("first line %q, want %q", first, "leasehold "+v.Version)
	}
	if !strings.Contains(out.String(), "gorm.io/gorm "+v.Dependencies["gorm.io/gorm"]) {
		t.Errorf("text output lacks gorm's version:\n%s", out.String())
	}

	if err := run([]string{"version", "--yaml"}, nil, &out, &errb); err == nil || !strings.Contains(err.Error(), "unknown flag") {
		t.Errorf("version --yaml: err = %v, want unknown flag", err)
	}
	if err := run([]string{"version", "extra"}, nil, &out, &errb); err == nil {
		t.Error("version extra: no error")
	}
}
