package tests

// Packaging checks: the systemd unit (systemd-analyze verify and security,
// and the directives it must keep), the binary the Containerfile copies
// (static: no ELF interpreter, no shared libraries), the Containerfile's
// references (paths that exist, the config it bakes in, ports, user), and
// `leasehold version` on a real build. The image itself is not built here:
// that needs a container registry for the builder's base image.

import (
	"bufio"
	"context"
	"debug/elf"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"

	"github.com/leasehold/leasehold/pkg/config"
)

// repoRoot is the module root, one level up from tests/.
const repoRoot = ".."

// serverVersionVar is the variable the Makefile and the Containerfile set
// with -ldflags -X.
const serverVersionVar = "github.com/leasehold/leasehold/pkg/server.Version"

// buildStatic builds cmd/leasehold as the Containerfile and `make build`
// do (CGO_ENABLED=0, -trimpath, the version given with -X) into a temp
// dir. -buildvcs=auto overrides a GOFLAGS=-buildvcs=false so the VCS stamp
// is there when the checkout allows it.
func buildStatic(t *testing.T, version string) string {
	t.Helper()
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("go tool not on PATH: %v", err)
	}
	bin := filepath.Join(t.TempDir(), "leasehold")
	// A cold build: CGO_ENABLED=0 and -trimpath share no cache entries with
	// the race-enabled test builds, and the pure-Go SQLite alone takes
	// minutes on two cores busy with the other suites.
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, goTool, "build", "-trimpath", "-buildvcs=auto",
		"-ldflags", "-s -w -X "+serverVersionVar+"="+version, "-o", bin, "./cmd/leasehold")
	cmd.Dir = repoRoot
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// TestPackaging builds the binary once and runs the packaging checks on it.
func TestPackaging(t *testing.T) {
	const version = "packaging-test-1"
	bin := buildStatic(t, version)
	t.Run("StaticBinary", func(t *testing.T) { testStaticBinary(t, bin) })
	t.Run("Version", func(t *testing.T) { testVersion(t, bin, version) })
	t.Run("SystemdUnit", func(t *testing.T) { testSystemdUnit(t, bin) })
	t.Run("Containerfile", func(t *testing.T) { testContainerfile(t, bin) })
}

// elfDynamic reports the interpreter (PT_INTERP) and the shared libraries
// (DT_NEEDED) of an ELF file: both empty for a static binary, which is
// what a scratch image can run.
func elfDynamic(t *testing.T, file string) (interp string, libs []string) {
	t.Helper()
	f, err := elf.Open(file)
	if err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			b := make([]byte, p.Filesz)
			if _, err := p.ReadAt(b, 0); err != nil {
				t.Fatalf("%s: PT_INTERP: %v", file, err)
			}
			interp = strings.TrimRight(string(b), "\x00")
			if interp == "" {
				interp = "(empty PT_INTERP)"
			}
		}
	}
	libs, err = f.ImportedLibraries()
	if err != nil && !errors.Is(err, elf.ErrNoSymbols) {
		t.Fatalf("%s: imported libraries: %v", file, err)
	}
	return interp, libs
}

func testStaticBinary(t *testing.T, bin string) {
	// The check itself must see a dynamic binary as one: /bin/sh is.
	if _, err := os.Stat("/bin/sh"); err == nil {
		if interp, _ := elfDynamic(t, "/bin/sh"); interp == "" {
			t.Fatal("/bin/sh has no PT_INTERP: the static check cannot tell")
		}
	}
	interp, libs := elfDynamic(t, bin)
	if interp != "" || len(libs) > 0 {
		t.Errorf("the CGO_ENABLED=0 build is dynamic: interpreter %q, libraries %v (it would not start in a scratch image)", interp, libs)
	}
}

func testVersion(t *testing.T, bin, version string) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, bin, "version", "--json").Output()
	if err != nil {
		t.Fatalf("version --json: %v", err)
	}
	var v struct {
		Version      string            `json:"version"`
		GoVersion    string            `json:"go_version"`
		Module       string            `json:"module"`
		Revision     string            `json:"vcs_revision"`
		Time         string            `json:"vcs_time"`
		CGOEnabled   *bool             `json:"cgo_enabled"`
		Dependencies map[string]string `json:"dependencies"`
	}
	if err := json.Unmarshal(out, &v); err != nil {
		t.Fatalf("version --json: %v\n%s", err, out)
	}
	if v.Version != version || v.Module != "github.com/leasehold/leasehold" || !strings.HasPrefix(v.GoVersion, "go") {
		t.Errorf("version --json = %s", out)
	}
	if v.CGOEnabled == nil || *v.CGOEnabled {
		t.Errorf("cgo_enabled = %v, want false", v.CGOEnabled)
	}
	for _, p := range []string{"gorm.io/gorm", "modernc.org/sqlite", "github.com/go-sql-driver/mysql"} {
		if !strings.HasPrefix(v.Dependencies[p], "v") {
			t.Errorf("dependency %s: %q", p, v.Dependencies[p])
		}
	}
	// Go stamps the revision only when the module sits in a git checkout
	// whose .git is a directory (a `git worktree` has a .git file and gets
	// no stamp) and git runs.
	st, err := os.Stat(filepath.Join(repoRoot, ".git"))
	gitDir := err == nil && st.IsDir()
	head := ""
	if gitDir {
		if b, err := exec.CommandContext(ctx, "git", "-C", repoRoot, "rev-parse", "HEAD").Output(); err == nil {
			head = strings.TrimSpace(string(b))
		}
	}
	switch {
	case head != "":
		if v.Revision != head {
			t.Errorf("vcs_revision = %q, want HEAD %s", v.Revision, head)
		}
		if _, err := time.Parse(time.RFC3339, v.Time); err != nil {
			t.Errorf("vcs_time %q: %v", v.Time, err)
		}
	case gitDir:
		t.Logf("git did not answer in %s: revision not compared (got %q)", repoRoot, v.Revision)
	default:
		if v.Revision != "" {
			t.Errorf("vcs_revision = %q outside a git checkout", v.Revision)
		}
		t.Logf("%s/.git is not a directory: the build has no VCS stamp, which the text output must say", repoRoot)
		txt, err := exec.CommandContext(ctx, bin, "version").Output()
		if err != nil || !strings.Contains(string(txt), "revision:  unknown") {
			t.Errorf("version: %v\n%s", err, txt)
		}
	}
}

// unitFile is a systemd unit: section → key → values in file order.
type unitFile map[string]map[string][]string

func parseUnit(t *testing.T, file string) unitFile {
	t.Helper()
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	u := unitFile{}
	section := ""
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		switch {
		case line == "" || strings.HasPrefix(line, "#") || strings.HasPrefix(line, ";"):
		case strings.HasPrefix(line, "[") && strings.HasSuffix(line, "]"):
			section = line[1 : len(line)-1]
			u[section] = map[string][]string{}
		default:
			k, v, ok := strings.Cut(line, "=")
			if !ok || section == "" || strings.HasSuffix(line, "\\") {
				t.Fatalf("%s:%d: not a simple key=value in a section: %q", file, n, line)
			}
			u[section][strings.TrimSpace(k)] = append(u[section][strings.TrimSpace(k)], strings.TrimSpace(v))
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return u
}

// loadConfig reads a config file as `leasehold serve --config FILE` does
// ("" for the defaults). A *.sample file is read through a copy without
// that suffix, whose extension tells the format.
func loadConfig(t *testing.T, file string) *config.Config {
	t.Helper()
	if strings.HasSuffix(file, ".sample") {
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		cp := filepath.Join(t.TempDir(), strings.TrimSuffix(filepath.Base(file), ".sample"))
		if err := os.WriteFile(cp, b, 0o600); err != nil {
			t.Fatal(err)
		}
		file = cp
	}
	fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
	config.Flags(fs)
	args := []string{}
	if file != "" {
		args = append(args, "--config", file)
	}
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	c, err := config.Load(fs)
	if err != nil {
		t.Fatalf("config %q: %v", file, err)
	}
	return c
}

// requireTool finds a command, or skips loudly (fails under CI=true).
func requireTool(t *testing.T, name, pkg string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err == nil {
		return p
	}
	msg := fmt.Sprintf("%s is not installed (Debian package %s): this check was NOT RUN", name, pkg)
	if os.Getenv("CI") == "true" {
		t.Fatal(msg)
	}
	fmt.Fprintln(os.Stderr, "!!!!!!!! SKIPPING: "+msg)
	t.Skip("!!!!!!!! " + msg)
	return ""
}

func testSystemdUnit(t *testing.T, bin string) {
	const unitPath = repoRoot + "/etc/leasehold.service"
	u := parseUnit(t, unitPath)
	svc := u["Service"]
	if svc == nil {
		t.Fatal("no [Service] section")
	}
	for k, want := range map[string]string{
		"ExecStartPre": "/usr/bin/leasehold db sync --config /etc/leasehold/leasehold.conf",
		"ExecStart":    "/usr/bin/leasehold serve --config /etc/leasehold/leasehold.conf",
		"Restart":      "on-failure",
		"KillSignal":   "SIGTERM",
		// Hardening the unit promises.
		"DynamicUser": "yes", "StateDirectory": "leasehold", "ProtectSystem": "strict", "ProtectHome": "yes",
		"PrivateTmp": "yes", "PrivateDevices": "yes", "NoNewPrivileges": "yes", "CapabilityBoundingSet": "",
		"RestrictAddressFamilies": "AF_INET AF_INET6 AF_UNIX", "MemoryDenyWriteExecute": "yes",
		"LockPersonality": "yes", "RestrictNamespaces": "yes", "ProtectKernelTunables": "yes",
		"ProtectKernelModules": "yes", "ProtectKernelLogs": "yes", "ProtectControlGroups": "yes",
		"ProtectClock": "yes", "ProtectHostname": "yes", "RestrictRealtime": "yes", "RestrictSUIDSGID": "yes",
		"UMask": "0077",
	} {
		if got := svc[k]; len(got) != 1 || got[0] != want {
			t.Errorf("[Service] %s = %q, want exactly %q", k, got, want)
		}
	}
	if !slices.Contains(svc["SystemCallFilter"], "@system-service") {
		t.Errorf("SystemCallFilter = %q, want @system-service among them", svc["SystemCallFilter"])
	}
	if got := u["Install"]["WantedBy"]; !slices.Equal(got, []string{"multi-user.target"}) {
		t.Errorf("[Install] WantedBy = %q", got)
	}

	// systemd must wait longer than the server drains, or it SIGKILLs a
	// drain in progress: the default and every shipped config.
	stop, err := time.ParseDuration(strings.Join(svc["TimeoutStopSec"], ""))
	if err != nil {
		t.Fatalf("TimeoutStopSec %q: %v (write it as a Go duration, e.g. 45s)", svc["TimeoutStopSec"], err)
	}
	for _, f := range []string{"", repoRoot + "/etc/leasehold.conf.sample", repoRoot + "/etc/leasehold.yaml.sample", repoRoot + "/etc/leasehold.container.conf"} {
		if d := loadConfig(t, f).ShutdownTimeout; stop <= d {
			t.Errorf("TimeoutStopSec %v is not above shutdown_timeout %v (config %q)", stop, d, f)
		}
	}
	// The sample the unit is meant to run with keeps its SQLite database
	// in the StateDirectory, the only place the service may write.
	if db := loadConfig(t, repoRoot+"/etc/leasehold.conf.sample").Database; !strings.HasPrefix(db, "sqlite:////var/lib/leasehold/") {
		t.Errorf("leasehold.conf.sample database %q is outside StateDirectory /var/lib/leasehold", db)
	}

	analyze := requireTool(t, "systemd-analyze", "systemd")
	src, err := os.ReadFile(unitPath)
	if err != nil {
		t.Fatal(err)
	}
	// verify checks that the ExecStart binaries exist: point a copy at the
	// binary just built.
	dir := t.TempDir()
	unit := filepath.Join(dir, "leasehold.service")
	if err := os.WriteFile(unit, []byte(strings.ReplaceAll(string(src), "/usr/bin/leasehold", bin)), 0o644); err != nil {
		t.Fatal(err)
	}
	verify := func(file string) (string, error) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		out, err := exec.CommandContext(ctx, analyze, "verify", "--man=no", file).CombinedOutput()
		return strings.TrimSpace(string(out)), err
	}
	if out, err := verify(unit); err != nil || out != "" {
		t.Errorf("systemd-analyze verify: %v; every line is a problem:\n%s", err, out)
	}
	// The same check on a broken copy must complain (systemd-analyze
	// exits 0 on unknown keys; only its output tells).
	bad := filepath.Join(dir, "broken.service")
	if err := os.WriteFile(bad, []byte(strings.Replace(string(src), "Restart=on-failure", "Restart=sometimes\nProtectEverything=yes", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, _ := verify(bad); !strings.Contains(out, "sometimes") || !strings.Contains(out, "ProtectEverything") {
		t.Errorf("systemd-analyze verify said nothing useful of a broken unit: %q", out)
	}

	// Exposure score of the sandbox (0 best, 10 worst): at most 2.0.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, analyze, "security", "--offline=yes", "--threshold=20", unit).CombinedOutput()
	m := regexp.MustCompile(`Overall exposure level for leasehold\.service: ([0-9.]+)`).FindSubmatch(out)
	if m == nil {
		t.Fatalf("systemd-analyze security: no exposure level: %v\n%s", err, out)
	}
	score, _ := strconv.ParseFloat(string(m[1]), 64)
	t.Logf("systemd-analyze security: exposure level %.1f (0 best, 10 worst)", score)
	if err != nil || score > 2.0 {
		t.Errorf("systemd-analyze security: exposure %.1f > 2.0 (%v):\n%s", score, err, out)
	}
}

// instruction is one Containerfile instruction: its keyword (upper case)
// and the rest of its (continued) line.
type instruction struct {
	Cmd, Args string
	Stage     int // index of the FROM it belongs to
}

func parseContainerfile(t *testing.T, file string) []instruction {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var out []instruction
	stage := -1
	var cur strings.Builder
	for _, line := range strings.Split(string(b), "\n") {
		trimmed := strings.TrimSpace(line)
		if strings.HasPrefix(trimmed, "#") || (trimmed == "" && cur.Len() == 0) {
			continue
		}
		cont := strings.HasSuffix(trimmed, "\\")
		cur.WriteString(strings.TrimSuffix(trimmed, "\\"))
		cur.WriteString(" ")
		if cont {
			continue
		}
		cmd, args, _ := strings.Cut(strings.TrimSpace(cur.String()), " ")
		cur.Reset()
		cmd = strings.ToUpper(cmd)
		if cmd == "FROM" {
			stage++
		}
		out = append(out, instruction{Cmd: cmd, Args: strings.TrimSpace(args), Stage: stage})
	}
	if cur.Len() > 0 {
		t.Fatalf("%s ends inside a continued line", file)
	}
	return out
}

// copyArgs splits a COPY's flags from its sources and destination.
func copyArgs(args string) (flags map[string]string, srcs []string, dst string) {
	flags = map[string]string{}
	f := strings.Fields(args)
	for len(f) > 0 && strings.HasPrefix(f[0], "--") {
		k, v, _ := strings.Cut(strings.TrimPrefix(f[0], "--"), "=")
		flags[k] = v
		f = f[1:]
	}
	if len(f) < 2 {
		return flags, nil, ""
	}
	return flags, f[:len(f)-1], f[len(f)-1]
}

func testContainerfile(t *testing.T, bin string) {
	ins := parseContainerfile(t, repoRoot+"/Containerfile")
	var froms []instruction
	args := map[string]string{}
	for _, in := range ins {
		switch in.Cmd {
		case "FROM":
			froms = append(froms, in)
		case "ARG":
			k, v, _ := strings.Cut(in.Args, "=")
			args[k] = v
		}
	}
	if len(froms) != 2 {
		t.Fatalf("want a builder and a final stage, got FROM %v", froms)
	}
	if !regexp.MustCompile(`^golang:\$\{GO_VERSION\} AS build$`).MatchString(froms[0].Args) {
		t.Errorf("builder stage FROM %q, want golang:${GO_VERSION} AS build", froms[0].Args)
	}
	if froms[1].Args != "scratch" {
		t.Errorf("final stage FROM %q, want scratch", froms[1].Args)
	}
	// The builder's Go is the one go.mod asks for.
	gomod, err := os.ReadFile(repoRoot + "/go.mod")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^go (\d+\.\d+)`).FindSubmatch(gomod)
	if m == nil || args["GO_VERSION"] != string(m[1]) {
		t.Errorf("ARG GO_VERSION=%q, go.mod says go %s", args["GO_VERSION"], m)
	}

	var (
		buildOut  string                // the go build -o path
		made      []string              // directories the builder creates (mkdir)
		finalDsts = map[string]string{} // final-stage destination → builder source
		final     = map[string][]string{}
	)
	repoPath := regexp.MustCompile(`^(\./)?(cmd|etc|pkg|scripts|models|handlers|plugins)/[^ ]*$`)
	for _, in := range ins {
		switch {
		case in.Cmd == "COPY" && in.Stage == 0:
			flags, srcs, _ := copyArgs(in.Args)
			if flags["from"] != "" {
				t.Errorf("builder COPY %q copies from another stage", in.Args)
			}
			for _, s := range srcs {
				if _, err := os.Stat(filepath.Join(repoRoot, s)); err != nil {
					t.Errorf("COPY %s: not in the repository: %v", s, err)
				}
			}
		case in.Cmd == "RUN" && in.Stage == 0:
			f := strings.Fields(in.Args)
			for i, w := range f {
				if repoPath.MatchString(w) {
					if _, err := os.Stat(filepath.Join(repoRoot, w)); err != nil {
						t.Errorf("RUN uses %s: not in the repository: %v", w, err)
					}
				}
				if w == "-o" && i+1 < len(f) && slices.Contains(f, "build") {
					buildOut = f[i+1]
				}
				if w == "mkdir" {
					for _, d := range f[i+1:] {
						if d == "&&" {
							break
						}
						if !strings.HasPrefix(d, "-") && d != "1777" {
							made = append(made, d)
						}
					}
				}
			}
			if slices.Contains(f, "build") {
				if !strings.HasPrefix(in.Args, "CGO_ENABLED=0 go build ") {
					t.Errorf("go build line %q: want CGO_ENABLED=0 go build …", in.Args)
				}
				if !strings.Contains(in.Args, "-X "+serverVersionVar+"=${VERSION}") || !strings.Contains(in.Args, "./cmd/leasehold") {
					t.Errorf("go build line %q: want -X %s=${VERSION} and ./cmd/leasehold", in.Args, serverVersionVar)
				}
			}
		case in.Cmd == "COPY" && in.Stage == 1:
			flags, srcs, dst := copyArgs(in.Args)
			if flags["from"] != "build" || len(srcs) != 1 {
				t.Errorf("final COPY %q: want one source --from=build", in.Args)
				continue
			}
			finalDsts[dst] = srcs[0]
		case in.Stage == 1:
			final[in.Cmd] = append(final[in.Cmd], in.Args)
		}
	}
	if buildOut == "" {
		t.Fatal("no `go build -o` in the builder stage")
	}
	// Every file the final stage takes is made by the builder, or is a
	// file of the golang base image known to be there.
	baseImageFiles := []string{"/etc/ssl/certs/ca-certificates.crt"} // Debian's ca-certificates, in golang images
	for dst, src := range finalDsts {
		ok := src == buildOut || slices.Contains(baseImageFiles, src)
		for _, d := range made {
			ok = ok || src == d || strings.HasPrefix(src, d+"/")
		}
		if !ok {
			t.Errorf("COPY --from=build %s %s: the builder does not make %s", src, dst, src)
		}
	}
	if finalDsts["/leasehold"] != buildOut {
		t.Errorf("/leasehold comes from %q, want the go build output %q", finalDsts["/leasehold"], buildOut)
	}
	if got := final["USER"]; !slices.Equal(got, []string{"65532:65532"}) {
		t.Errorf("USER %q, want 65532:65532", got)
	}
	if got := final["HEALTHCHECK"]; got != nil {
		t.Errorf("HEALTHCHECK %q cannot run in scratch (no shell, no client)", got)
	}
	var entry, cmd []string
	if len(final["ENTRYPOINT"]) != 1 || json.Unmarshal([]byte(final["ENTRYPOINT"][0]), &entry) != nil || !slices.Equal(entry, []string{"/leasehold"}) {
		t.Errorf(`ENTRYPOINT %q, want ["/leasehold"] (exec form)`, final["ENTRYPOINT"])
	}
	if len(final["CMD"]) != 1 || json.Unmarshal([]byte(final["CMD"][0]), &cmd) != nil || len(cmd) != 3 || cmd[0] != "serve" || cmd[1] != "--config" {
		t.Fatalf(`CMD %q, want ["serve", "--config", FILE]`, final["CMD"])
	}
	// The baked-in config is etc/leasehold.container.conf; what it says
	// agrees with EXPOSE and VOLUME.
	confSrc, ok := finalDsts[cmd[2]]
	if !ok {
		t.Fatalf("CMD's config %s is not copied into the image", cmd[2])
	}
	const containerConf = "etc/leasehold.container.conf"
	if !strings.Contains(strings.Join(flatRuns(ins), "\n"), "cp "+containerConf+" "+confSrc) {
		t.Errorf("the builder does not copy %s to %s", containerConf, confSrc)
	}
	c := loadConfig(t, repoRoot+"/"+containerConf)
	var ports []string
	for _, addr := range []string{c.Listen, c.PlacementListen} {
		host, port, err := net.SplitHostPort(addr)
		if err != nil || host != "0.0.0.0" {
			t.Errorf("container listen address %q: want 0.0.0.0:PORT (%v)", addr, err)
		}
		ports = append(ports, port)
	}
	if got := strings.Fields(strings.Join(final["EXPOSE"], " ")); !slices.Equal(got, ports) || !slices.Equal(got, []string{"1234", "8778"}) {
		t.Errorf("EXPOSE %v, config listens on %v; want 1234 8778", got, ports)
	}
	var volumes []string
	if len(final["VOLUME"]) != 1 || json.Unmarshal([]byte(final["VOLUME"][0]), &volumes) != nil || len(volumes) != 1 {
		t.Fatalf("VOLUME %q: want one, JSON form", final["VOLUME"])
	}
	dbFile := strings.TrimPrefix(c.Database, "sqlite:///")
	if path.Dir(dbFile) != volumes[0] {
		t.Errorf("container database %q is not in the volume %s", c.Database, volumes[0])
	}
	if src, ok := finalDsts[volumes[0]]; !ok || !strings.Contains(findCopy(ins, volumes[0]), "--chown=65532:65532") {
		t.Errorf("volume %s: not made in the image owned by 65532 (from %q)", volumes[0], src)
	}

	// The baked-in config works with the built binary, and the environment
	// overrides its database as the file's comment says.
	dbPath := filepath.Join(t.TempDir(), "env.db")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	sync := exec.CommandContext(ctx, bin, "db", "sync", "--config", repoRoot+"/"+containerConf)
	sync.Env = append(os.Environ(), "LEASEHOLD_DATABASE=sqlite:///"+dbPath)
	if out, err := sync.CombinedOutput(); err != nil {
		t.Fatalf("db sync with the container config: %v\n%s", err, out)
	}
	if st, err := os.Stat(dbPath); err != nil || st.Size() == 0 {
		t.Errorf("LEASEHOLD_DATABASE did not override the container config's database: %v", err)
	}
}

// flatRuns is every RUN line's arguments.
func flatRuns(ins []instruction) []string {
	var out []string
	for _, in := range ins {
		if in.Cmd == "RUN" {
			out = append(out, in.Args)
		}
	}
	return out
}

// findCopy is the final-stage COPY whose destination is dst.
func findCopy(ins []instruction, dst string) string {
	for _, in := range ins {
		if in.Cmd == "COPY" && in.Stage == 1 {
			if _, _, d := copyArgs(in.Args); d == dst {
				return in.Args
			}
		}
	}
	return ""
}
