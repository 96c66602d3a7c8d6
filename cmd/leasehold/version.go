package main

import (
	"encoding/json"
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"

	"github.com/spf13/pflag"

	"github.com/leasehold/leasehold/pkg/server"
)

// versionDeps are the dependencies whose versions an operator or a bug
// report needs: the ORM, both database drivers (and the SQLite engine
// under the GORM dialector) and the OpenStack client library. One that is
// not linked into the binary is left out rather than reported as missing.
var versionDeps = []string{
	"gorm.io/gorm",
	"github.com/libtnb/sqlite",
	"modernc.org/sqlite",
	"gorm.io/driver/mysql",
	"github.com/go-sql-driver/mysql",
	"github.com/gophercloud/gophercloud/v2",
}

// versionInfo is what `leasehold version` reports; its JSON form is the
// output of `leasehold version --json`.
type versionInfo struct {
	Version       string            `json:"version"`
	GoVersion     string            `json:"go_version"`
	Platform      string            `json:"platform"`
	Path          string            `json:"path,omitempty"`
	Module        string            `json:"module,omitempty"`
	ModuleVersion string            `json:"module_version,omitempty"`
	VCS           string            `json:"vcs,omitempty"`
	Revision      string            `json:"vcs_revision,omitempty"`
	Time          string            `json:"vcs_time,omitempty"`
	Modified      *bool             `json:"vcs_modified,omitempty"`
	CGOEnabled    *bool             `json:"cgo_enabled,omitempty"`
	Dependencies  map[string]string `json:"dependencies"`
}

// buildVersion assembles the report from the linked-in version string and
// the binary's build information (ok false: none, as in a binary built
// without module support).
func buildVersion(version string, bi *debug.BuildInfo, ok bool) versionInfo {
	v := versionInfo{
		Version:      version,
		GoVersion:    runtime.Version(),
		Platform:     runtime.GOOS + "/" + runtime.GOARCH,
		Dependencies: map[string]string{},
	}
	if !ok || bi == nil {
		return v
	}
	if bi.GoVersion != "" {
		v.GoVersion = bi.GoVersion
	}
	v.Path = bi.Path
	v.Module = bi.Main.Path
	v.ModuleVersion = bi.Main.Version
	// `go install …@vX.Y.Z` stamps the module version but passes no -X
	// flag: the module's version then says more than a development default.
	if isDevVersion(version) && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		v.Version = bi.Main.Version
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs":
			v.VCS = s.Value
		case "vcs.revision":
			v.Revision = s.Value
		case "vcs.time":
			v.Time = s.Value
		case "vcs.modified":
			if b, err := strconv.ParseBool(s.Value); err == nil {
				v.Modified = &b
			}
		case "CGO_ENABLED":
			b := s.Value == "1"
			v.CGOEnabled = &b
		}
	}
	want := map[string]bool{}
	for _, p := range versionDeps {
		want[p] = true
	}
	for _, d := range bi.Deps {
		if d == nil || !want[d.Path] {
			continue
		}
		ver := d.Version
		if d.Replace != nil {
			// A replaced module runs the replacement's code.
			ver = fmt.Sprintf("%s => %s %s", d.Version, d.Replace.Path, d.Replace.Version)
		}
		v.Dependencies[d.Path] = strings.TrimSpace(ver)
	}
	return v
}

// isDevVersion tells the built-in development default (pkg/server's
// "…-dev", or the Makefile's "dev" outside a git checkout) from a release
// version given with -ldflags -X.
func isDevVersion(v string) bool { return v == "" || v == "dev" || strings.HasSuffix(v, "-dev") }

// writeText prints the report for a person: the first line is
// "leasehold VERSION", as before build information was added.
func (v versionInfo) writeText(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "leasehold %s\n", v.Version)
	line := func(k, val string) {
		if val != "" {
			fmt.Fprintf(&b, "  %-10s %s\n", k+":", val)
		}
	}
	line("go", v.GoVersion+" "+v.Platform)
	if v.Module != "" {
		line("module", strings.TrimSpace(v.Module+" "+v.ModuleVersion))
	}
	rev := v.Revision
	if rev == "" {
		rev = "unknown (built without version control information)"
	} else if v.Modified != nil && *v.Modified {
		rev += " (modified)"
	}
	line("revision", rev)
	line("time", v.Time)
	if v.CGOEnabled != nil {
		line("cgo", strconv.FormatBool(*v.CGOEnabled))
	}
	for _, p := range versionDeps {
		if ver, ok := v.Dependencies[p]; ok {
			fmt.Fprintf(&b, "  %s %s\n", p, ver)
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// versionCmd is `leasehold version [--json]`.
func versionCmd(args []string, stdout, stderr io.Writer) error {
	fs := pflag.NewFlagSet("version", pflag.ContinueOnError)
	fs.SetOutput(stderr)
	asJSON := fs.Bool("json", false, "print the version and build information as JSON")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments: %v", fs.Args())
	}
	bi, ok := debug.ReadBuildInfo()
	v := buildVersion(server.Version, bi, ok)
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(v)
	}
	return v.writeText(stdout)
}
