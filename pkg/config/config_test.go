package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/spf13/pflag"
)

// cleanEnv hides every LEASEHOLD_* variable of the test process (viper
// ignores empty ones), so the tests see only what they set.
func cleanEnv(t *testing.T) {
	t.Helper()
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); strings.HasPrefix(k, "LEASEHOLD_") {
			t.Setenv(k, "")
		}
	}
}

// load parses args with the serve flags and loads the config.
func load(t *testing.T, args ...string) (*Config, error) {
	t.Helper()
	fs := pflag.NewFlagSet("serve", pflag.ContinueOnError)
	Flags(fs)
	if err := fs.Parse(args); err != nil {
		t.Fatalf("flags %v: %v", args, err)
	}
	return Load(fs)
}

func mustLoad(t *testing.T, args ...string) *Config {
	t.Helper()
	c, err := load(t, args...)
	if err != nil {
		t.Fatalf("Load(%v): %v", args, err)
	}
	return c
}

// sample copies etc/<name> to a temp file named without ".sample", as an
// operator would install it, and returns that path.
func sample(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "etc", name))
	if err != nil {
		t.Fatal(err)
	}
	return writeFile(t, strings.TrimSuffix(name, ".sample"), string(b))
}

func writeFile(t *testing.T, name, text string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestDefaults(t *testing.T) {
	cleanEnv(t)
	c := mustLoad(t)
	got := struct {
		Listen, PlacementListen, Database, Auth, LogLevel, LogFormat string
		AutoMigrate                                                  bool
		ShutdownTimeout                                              time.Duration
		Placement                                                    Placement
		CORS                                                         CORS
		Metrics                                                      Metrics
	}{c.Listen, c.PlacementListen, c.Database, c.Auth, c.LogLevel, c.LogFormat, c.AutoMigrate, c.ShutdownTimeout, c.Placement, c.CORS, c.Metrics}
	want := got
	want.Listen, want.PlacementListen, want.Database = "127.0.0.1:1234", "", "sqlite:///leasehold.db"
	// No auth strategy named means keystone, as upstream: fail closed.
	want.Auth, want.LogLevel, want.LogFormat = "keystone", "info", "text"
	want.AutoMigrate, want.ShutdownTimeout = true, 10*time.Second
	want.Placement = Placement{
		PolicyMode:                    "legacy",
		IncompleteConsumerProjectID:   "00000000-0000-0000-0000-000000000000",
		IncompleteConsumerUserID:      "00000000-0000-0000-0000-000000000000",
		MaxAllocationCandidates:       -1,
		AllocationCandidatesSearchCap: 1000000,
		ExternalPlacement:             ExternalPlacement{Timeout: 30},
	}
	want.CORS = CORS{
		AllowCredentials: true,
		ExposeHeaders:    []string{"X-OpenStack-Request-ID", "OpenStack-API-Version"},
		MaxAge:           3600,
		AllowMethods:     []string{"GET", "PUT", "POST", "DELETE", "PATCH"},
		AllowHeaders:     []string{"X-Auth-Token", "OpenStack-API-Version", "Content-Type", "X-OpenStack-Request-ID"},
	}
	want.Metrics = Metrics{QueryTimeout: 2 * time.Second}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("defaults (-want +got):\n%s", diff)
	}
}

// TestSamples loads both shipped samples: each must load, differ from the
// defaults where it says it does, and the INI and YAML forms must give
// the same configuration.
func TestSamples(t *testing.T) {
	cleanEnv(t)
	ini := mustLoad(t, "--config", sample(t, "leasehold.conf.sample"))
	yml := mustLoad(t, "--config", sample(t, "leasehold.yaml.sample"))
	if diff := cmp.Diff(ini, yml); diff != "" {
		t.Errorf("leasehold.conf.sample and leasehold.yaml.sample differ (-ini +yaml):\n%s", diff)
	}
	for name, c := range map[string]*Config{"conf": ini, "yaml": yml} {
		t.Run(name, func(t *testing.T) {
			checks := []struct {
				what      string
				got, want any
			}{
				{"listen", c.Listen, "127.0.0.1:1234"},
				{"placement_listen", c.PlacementListen, "127.0.0.1:8778"},
				{"database", c.Database, "sqlite:////var/lib/leasehold/leasehold.db"},
				{"auth", c.Auth, "noauth"},
				{"auto_migrate", c.AutoMigrate, false},
				{"log_level", c.LogLevel, "debug"},
				{"log_format", c.LogFormat, "json"},
				{"shutdown_timeout", c.ShutdownTimeout, 20 * time.Second},
				{"placement.policy_mode", c.Placement.PolicyMode, "secure"},
				{"placement.incomplete_consumer_project_id", c.Placement.IncompleteConsumerProjectID, "11111111-1111-1111-1111-111111111111"},
				{"placement.incomplete_consumer_user_id", c.Placement.IncompleteConsumerUserID, "22222222-2222-2222-2222-222222222222"},
				{"placement.randomize_allocation_candidates", c.Placement.RandomizeAllocationCandidates, true},
				{"placement.max_allocation_candidates", c.Placement.MaxAllocationCandidates, 1000},
				{"placement.allocation_candidates_search_cap", c.Placement.AllocationCandidatesSearchCap, 200000},
				{"metrics.listen", c.Metrics.Listen, "127.0.0.1:9100"},
				{"metrics.on_main", c.Metrics.OnMain, false},
				{"metrics.query_timeout", c.Metrics.QueryTimeout, 5 * time.Second},
				{"ownership.redistribute_interval", c.Ownership.RedistributeInterval, 600},
				{"cors.allowed_origin", c.CORS.AllowedOrigin, []string{"https://dashboard.example.com", "https://admin.example.com"}},
				{"cors.allow_credentials", c.CORS.AllowCredentials, false},
				{"cors.max_age", c.CORS.MaxAge, 600},
				{"cors.allow_headers", c.CORS.AllowHeaders, []string{"X-Auth-Token", "OpenStack-API-Version", "Content-Type"}},
				{"cors.allow_methods", c.CORS.AllowMethods, []string{"GET", "PUT", "POST", "DELETE"}},
			}
			for _, ck := range checks {
				if diff := cmp.Diff(ck.want, ck.got); diff != "" {
					t.Errorf("%s (-want +got):\n%s", ck.what, diff)
				}
			}
		})
	}
}

// TestPrecedence: flags > LEASEHOLD_* env > file > defaults.
func TestPrecedence(t *testing.T) {
	cleanEnv(t)
	t.Setenv("LEASEHOLD_DATABASE", "mysql+pymysql://u:p@db:3306/leasehold")
	t.Setenv("LEASEHOLD_PLACEMENT_POLICY_MODE", "open")
	t.Setenv("LEASEHOLD_CORS_ALLOWED_ORIGIN", "http://a.example, http://b.example")
	t.Setenv("LEASEHOLD_CORS_ALLOW_HEADERS", "openstack-api-version")
	t.Setenv("LEASEHOLD_LOG_FORMAT", "text")
	for _, file := range []string{"leasehold.conf.sample", "leasehold.yaml.sample"} {
		t.Run(file, func(t *testing.T) {
			c := mustLoad(t, "--config", sample(t, file), "--log-format", "json", "--listen", "127.0.0.1:0")
			checks := []struct {
				what      string
				got, want any
			}{
				{"database (env over file)", c.Database, "mysql+pymysql://u:p@db:3306/leasehold"},
				{"policy_mode (env over file)", c.Placement.PolicyMode, "open"},
				{"cors.allowed_origin (env, comma list)", c.CORS.AllowedOrigin, []string{"http://a.example", "http://b.example"}},
				{"cors.allow_headers (env)", c.CORS.AllowHeaders, []string{"openstack-api-version"}},
				{"log_format (flag over env)", c.LogFormat, "json"},
				{"listen (flag over file)", c.Listen, "127.0.0.1:0"},
				{"placement_listen (file over default)", c.PlacementListen, "127.0.0.1:8778"},
			}
			for _, ck := range checks {
				if diff := cmp.Diff(ck.want, ck.got); diff != "" {
					t.Errorf("%s (-want +got):\n%s", ck.what, diff)
				}
			}
		})
	}
}

func TestConfigFromEnvVariable(t *testing.T) {
	cleanEnv(t)
	t.Setenv("LEASEHOLD_CONFIG", sample(t, "leasehold.yaml.sample"))
	if c := mustLoad(t); c.Placement.PolicyMode != "secure" {
		t.Errorf("LEASEHOLD_CONFIG not read: policy_mode = %q", c.Placement.PolicyMode)
	}
}

func TestOsloFiles(t *testing.T) {
	tests := []struct {
		name, text string
		check      func(*Config) string
	}{
		{
			name: "placement.conf", // as packaged by Debian's placement-api
			text: "[DEFAULT]\ndebug = false\n[api]\nauth_strategy = noauth2\n[placement_database]\nconnection = mysql+pymysql://placement:pw@10.0.0.1/placement\n",
			check: func(c *Config) string {
				if c.Database != "mysql+pymysql://placement:pw@10.0.0.1/placement" || c.Auth != "noauth" || c.LogLevel != "info" {
					return "database/auth/log_level not taken from placement.conf"
				}
				return ""
			},
		},
		{
			name: "Mixed-Case.ini",
			text: "[DEFAULT]\nLISTEN = 127.0.0.1:9\n[Placement]\nPolicy_Mode = open\n",
			check: func(c *Config) string {
				if c.Listen != "127.0.0.1:9" || c.Placement.PolicyMode != "open" {
					return "keys and sections are not case-insensitive"
				}
				return ""
			},
		},
		{
			name: "x.toml",
			text: "listen = \"127.0.0.1:7\"\n[placement]\npolicy_mode = \"open\"\n[cors]\nallowed_origin = [\"http://t.example\"]\n",
			check: func(c *Config) string {
				if c.Listen != "127.0.0.1:7" || c.Placement.PolicyMode != "open" || len(c.CORS.AllowedOrigin) != 1 {
					return "TOML not read"
				}
				return ""
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cleanEnv(t)
			c := mustLoad(t, "--config", writeFile(t, tc.name, tc.text))
			if msg := tc.check(c); msg != "" {
				t.Errorf("%s: %+v", msg, c)
			}
		})
	}
}

func TestInvalid(t *testing.T) {
	tests := []struct {
		name    string
		env     map[string]string
		file    [2]string // name, text
		args    []string
		wantErr string
	}{
		{name: "policy mode", env: map[string]string{"LEASEHOLD_PLACEMENT_POLICY_MODE": "strict"}, wantErr: "policy_mode"},
		{name: "auth", args: []string{"--auth", "kerberos"}, wantErr: `auth "kerberos" is not supported`},
		{name: "negative search cap", env: map[string]string{"LEASEHOLD_PLACEMENT_ALLOCATION_CANDIDATES_SEARCH_CAP": "-5"}, wantErr: "allocation_candidates_search_cap -5"},
		{name: "log format", args: []string{"--log-format", "xml"}, wantErr: "log_format"},
		{name: "empty listen", args: []string{"--listen", ""}, wantErr: "listen must not be empty"},
		{name: "file type", file: [2]string{"x.properties", "a=b\n"}, wantErr: "unknown type"},
		{name: "missing file", args: []string{"--config", "/nonexistent/leasehold.yaml"}, wantErr: "/nonexistent/leasehold.yaml"},
		{name: "broken yaml", file: [2]string{"x.yaml", "listen: [\n"}, wantErr: "x.yaml"},
		{name: "metrics query timeout", env: map[string]string{"LEASEHOLD_METRICS_QUERY_TIMEOUT": "0s"}, wantErr: "metrics.query_timeout"},
		{name: "negative redistribute interval", env: map[string]string{"LEASEHOLD_OWNERSHIP_REDISTRIBUTE_INTERVAL": "-1"}, wantErr: "ownership.redistribute_interval -1"},
		{name: "bad duration", file: [2]string{"x.yaml", "shutdown_timeout: soon\n"}, wantErr: "shutdown_timeout"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cleanEnv(t)
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			args := tc.args
			if tc.file[0] != "" {
				args = append(args, "--config", writeFile(t, tc.file[0], tc.file[1]))
			}
			c, err := load(t, args...)
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("Load(%v) = %+v, %v; want error containing %q", args, c, err, tc.wantErr)
			}
		})
	}
}
