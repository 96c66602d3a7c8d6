// Package config loads Leasehold's settings from flags, a config file
// (YAML, TOML or an oslo-style INI such as blazar.conf/placement.conf) and
// LEASEHOLD_<KEY> environment variables, in that order of precedence
// (flags win). It is read once in cmd/ and passed down explicitly.
package config

import (
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"github.com/spf13/viper"
)

// Config is every setting the service reads.
type Config struct {
	// Listen is the main listener: Blazar under /v1, Placement under
	// /placement, /healthcheck and /metrics.
	Listen string `mapstructure:"listen"`
	// PlacementListen, when set, is a second listener serving Placement at
	// its root, as upstream's placement-api does on :8778.
	PlacementListen string `mapstructure:"placement_listen"`
	// Database is an oslo-style URL (sqlite:///path.db, mysql+pymysql://…).
	Database string `mapstructure:"database"`
	// Auth is the auth strategy: "keystone" or "noauth" (alias
	// "noauth2"), from --auth, LEASEHOLD_AUTH or [api] auth_strategy.
	Auth string `mapstructure:"auth"`
	// AutoMigrate runs the schema migrations when serve starts.
	AutoMigrate bool `mapstructure:"auto_migrate"`
	// LogLevel is debug, info, warn or error; LogFormat is json or text.
	LogLevel  string `mapstructure:"log_level"`
	LogFormat string `mapstructure:"log_format"`
	// ShutdownTimeout bounds the graceful drain on SIGTERM.
	ShutdownTimeout time.Duration `mapstructure:"shutdown_timeout"`

	Placement  Placement  `mapstructure:"placement"`
	CORS       CORS       `mapstructure:"cors"`
	OsloPolicy OsloPolicy `mapstructure:"oslo_policy"`
	// KeystoneAuthtoken is used when Auth is "keystone" (see keystone.go).
	KeystoneAuthtoken KeystoneAuthtoken `mapstructure:"keystone_authtoken"`
	Metrics           Metrics           `mapstructure:"metrics"`
	// Compute and Nova choose and reach the compute service (see
	// compute.go).
	Compute Compute `mapstructure:"compute"`
	Nova    Nova    `mapstructure:"nova"`
	// Ownership tunes the ownership policy (see ownership.go).
	Ownership Ownership `mapstructure:"ownership"`
	// Blazar holds blazar.conf's lease settings (see blazar.go).
	Blazar Blazar `mapstructure:",squash"`
	// Messaging holds the usage notifications' settings (see notify.go).
	Messaging Messaging `mapstructure:",squash"`
}

// Placement holds the [placement] section.
type Placement struct {
	// PolicyMode selects the policy defaults: legacy (every API needs the
	// admin role), secure (new defaults with scope checks) or open.
	PolicyMode                    string `mapstructure:"policy_mode"`
	IncompleteConsumerProjectID   string `mapstructure:"incomplete_consumer_project_id"`
	IncompleteConsumerUserID      string `mapstructure:"incomplete_consumer_user_id"`
	RandomizeAllocationCandidates bool   `mapstructure:"randomize_allocation_candidates"`
	MaxAllocationCandidates       int    `mapstructure:"max_allocation_candidates"`
	// AllocationCandidatesSearchCap is Leasehold's bound on the work of
	// one GET /allocation_candidates whatever max_allocation_candidates
	// says (upstream's default, -1, is unbounded): at most this many
	// candidates generated and provider combinations tried per group.
	// 0 disables it.
	AllocationCandidatesSearchCap int `mapstructure:"allocation_candidates_search_cap"`
	// ExternalPlacement, when configured, is the Placement service
	// instance reservations write to (see placement.go).
	ExternalPlacement `mapstructure:",squash"`
}

// OsloPolicy holds the [oslo_policy] section (oslo.policy's options).
type OsloPolicy struct {
	// PolicyFile is a YAML or JSON file of rule name → check string
	// overriding the defaults of both APIs; "" reads none. A file that
	// does not parse stops start-up.
	PolicyFile string `mapstructure:"policy_file"`
	// EnforceNewDefaults false lets a Blazar rule that replaced a
	// deprecated rule pass when either check passes. Placement follows
	// placement.policy_mode instead.
	EnforceNewDefaults bool `mapstructure:"enforce_new_defaults"`
	// EnforceScope true refuses a token whose scope is not one of the
	// Blazar rule's scope types. Placement follows placement.policy_mode.
	EnforceScope bool `mapstructure:"enforce_scope"`
}

// Metrics holds the [metrics] section: where Prometheus scrapes /metrics.
// Both ways may be on at once; with neither, nothing is measured.
type Metrics struct {
	// Listen, when set, is a separate listener serving /metrics without
	// authentication (keep it on a private address).
	Listen string `mapstructure:"listen"`
	// OnMain serves /metrics on the main listener as well, to callers
	// the policy rule leasehold:metrics:get admits (admin by default).
	OnMain bool `mapstructure:"on_main"`
	// QueryTimeout bounds each query a scrape runs (the lease and outbox
	// counts).
	QueryTimeout time.Duration `mapstructure:"query_timeout"`
}

// Enabled reports whether metrics are served anywhere.
func (m Metrics) Enabled() bool { return m.Listen != "" || m.OnMain }

// CORS holds the [cors] section (oslo.middleware semantics). CORS is
// enabled only when AllowedOrigin is non-empty.
type CORS struct {
	AllowedOrigin    []string `mapstructure:"allowed_origin"`
	AllowCredentials bool     `mapstructure:"allow_credentials"`
	ExposeHeaders    []string `mapstructure:"expose_headers"`
	MaxAge           int      `mapstructure:"max_age"`
	AllowMethods     []string `mapstructure:"allow_methods"`
	AllowHeaders     []string `mapstructure:"allow_headers"`
}

// Defaults are the values used when nothing else sets a key.
var defaults = map[string]any{
	"listen":           "127.0.0.1:1234",
	"placement_listen": "",
	"database":         "sqlite:///leasehold.db",
	"auth":             AuthKeystone,
	"auto_migrate":     true,
	"log_level":        "info",
	"log_format":       "text",
	"shutdown_timeout": "10s",

	"placement.policy_mode":                      "legacy",
	"placement.incomplete_consumer_project_id":   "00000000-0000-0000-0000-000000000000",
	"placement.incomplete_consumer_user_id":      "00000000-0000-0000-0000-000000000000",
	"placement.randomize_allocation_candidates":  false,
	"placement.max_allocation_candidates":        -1,
	"placement.allocation_candidates_search_cap": 1000000,

	"oslo_policy.policy_file":          "",
	"oslo_policy.enforce_new_defaults": true,
	"oslo_policy.enforce_scope":        false,

	"metrics.listen":        "",
	"metrics.on_main":       false,
	"metrics.query_timeout": "2s",

	"cors.allowed_origin":    []string{},
	"cors.allow_credentials": true,
	"cors.expose_headers":    []string{"X-OpenStack-Request-ID", "OpenStack-API-Version"},
	"cors.max_age":           3600,
	"cors.allow_methods":     []string{"GET", "PUT", "POST", "DELETE", "PATCH"},
	"cors.allow_headers":     []string{"X-Auth-Token", "OpenStack-API-Version", "Content-Type", "X-OpenStack-Request-ID"},
}

// osloAliases maps keys as an oslo INI file spells them (section.key,
// lower case) onto ours, so an existing placement.conf or blazar.conf can
// be pointed at directly.
var osloAliases = map[string]string{
	"database.connection":                "database",
	"placement_database.connection":      "database",
	"api.auth_strategy":                  "auth",
	"default.auth_strategy":              "auth",
	"placement_database.sync_on_startup": "auto_migrate",
	"default.debug":                      "log_level",
}

// Flags registers the serve flags on fs; their names are the config keys.
func Flags(fs *pflag.FlagSet) {
	fs.String("config", "", "config file (YAML, TOML, or oslo-style INI .conf)")
	fs.String("listen", defaults["listen"].(string), "main listener address (port 0 picks a free port)")
	fs.String("placement-listen", "", "optional second listener serving Placement at its root")
	fs.String("database", defaults["database"].(string), "database URL: sqlite:///path.db or mysql+pymysql://user:pw@host:port/db")
	fs.String("auth", defaults["auth"].(string), "auth strategy: keystone or noauth")
	fs.Bool("auto-migrate", true, "run database migrations at start")
	fs.String("log-level", "info", "log level: debug, info, warn, error")
	fs.String("log-format", "text", "log format: text or json")
}

// Load builds the Config from defaults, the config file named by --config
// (or LEASEHOLD_CONFIG), LEASEHOLD_* environment variables and the flags
// that were set explicitly.
func Load(fs *pflag.FlagSet) (*Config, error) {
	v := viper.NewWithOptions(viper.WithCodecRegistry(codecRegistry()))
	for k, val := range defaults {
		v.SetDefault(k, val)
	}
	v.SetEnvPrefix("LEASEHOLD")
	v.SetEnvKeyReplacer(strings.NewReplacer(".", "_", "-", "_"))
	v.AutomaticEnv()

	file := v.GetString("config")
	if fs != nil {
		if f := fs.Lookup("config"); f != nil && f.Changed {
			file = f.Value.String()
		}
	}
	if file != "" {
		if err := readFile(v, file); err != nil {
			return nil, err
		}
	}
	if fs != nil {
		var bindErr error
		fs.Visit(func(f *pflag.Flag) {
			if f.Name == "config" {
				return
			}
			if err := v.BindPFlag(strings.ReplaceAll(f.Name, "-", "_"), f); err != nil {
				bindErr = err
			}
		})
		if bindErr != nil {
			return nil, bindErr
		}
	}
	var c Config
	if err := v.Unmarshal(&c); err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	// Env and INI give lists as one comma-separated string.
	c.CORS.AllowedOrigin = splitList(c.CORS.AllowedOrigin)
	c.CORS.AllowHeaders = splitList(c.CORS.AllowHeaders)
	c.CORS.AllowMethods = splitList(c.CORS.AllowMethods)
	c.CORS.ExposeHeaders = splitList(c.CORS.ExposeHeaders)
	c.Messaging.Normalize()
	if err := c.validate(); err != nil {
		return nil, err
	}
	return &c, nil
}

func (c *Config) validate() error {
	if err := c.normalizeAuth(); err != nil {
		return err
	}
	if err := c.normalizeCompute(); err != nil {
		return err
	}
	if err := c.normalizeExternalPlacement(); err != nil {
		return err
	}
	switch c.Placement.PolicyMode {
	case "legacy", "secure", "open":
	default:
		return fmt.Errorf("config: placement.policy_mode %q: want legacy, secure or open", c.Placement.PolicyMode)
	}
	if n := c.Placement.AllocationCandidatesSearchCap; n < 0 {
		return fmt.Errorf("config: placement.allocation_candidates_search_cap %d: want 0 (off) or a positive count", n)
	}
	switch c.LogFormat {
	case "text", "json":
	default:
		return fmt.Errorf("config: log_format %q: want text or json", c.LogFormat)
	}
	if c.Listen == "" {
		return fmt.Errorf("config: listen must not be empty")
	}
	if c.Metrics.QueryTimeout <= 0 {
		return fmt.Errorf("config: metrics.query_timeout %v: want a positive duration", c.Metrics.QueryTimeout)
	}
	return c.Ownership.check()
}

func readFile(v *viper.Viper, file string) error {
	ext := strings.ToLower(strings.TrimPrefix(filepath.Ext(file), "."))
	switch ext {
	case "conf", "ini", "cfg":
		return readOslo(v, file)
	case "yaml", "yml", "toml", "json":
		v.SetConfigFile(file)
		if err := v.ReadInConfig(); err != nil {
			return fmt.Errorf("config file %s: %w", file, err)
		}
		return nil
	default:
		return fmt.Errorf("config file %s: unknown type %q (use .yaml, .toml, .json or .conf)", file, ext)
	}
}

func splitList(in []string) []string {
	var out []string
	for _, s := range in {
		for _, p := range strings.Split(s, ",") {
			if p = strings.TrimSpace(p); p != "" {
				out = append(out, p)
			}
		}
	}
	return out
}
