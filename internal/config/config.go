// Package config holds the one Config of the spool server and loads it from
// flags, SPOOL_* environment variables and an optional JSON file, in that
// order of precedence over the defaults.
package config

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/netip"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/spoolq/spool/internal/siteguard"
)

// DefaultAddr is the server's fixed default listen address.
const DefaultAddr = "127.0.0.1:7311"

// Config is every setting of the server.
type Config struct {
	// Addr is the HOST:PORT to listen on. Defaults to 127.0.0.1:7311.
	Addr string
	// Data is the folder of the embedded store. Defaults to ./spool-data.
	Data string
	// DB is the URL of a PostgreSQL database (postgres://…) that several
	// nodes share; empty runs the embedded SQLite store in Data. Defaults
	// to empty.
	DB string
	// Sync is the durability of commits: "full" fsyncs before answering and
	// survives power loss; "normal" survives a process crash but may lose
	// the last commits on power loss. Defaults to full.
	Sync string
	// MaxPayloadBytes bounds one job's payload, result or progress.
	// Defaults to 1 MiB.
	MaxPayloadBytes int
	// MaxBodyBytes bounds one request body. Defaults to 64 MiB.
	MaxBodyBytes int64
	// MaxBatch bounds the jobs of one batch enqueue and the items of one
	// batch ack, fail or extend. Defaults to 10000.
	MaxBatch int
	// MaxEventReaders bounds the GET /v1/events streams one node serves
	// at once; one more is answered 503. Each reader is a connection and a
	// goroutine that wakes when events come, whatever its filter. Defaults
	// to 256.
	MaxEventReaders int
	// RetainCompleted is how long completed and cancelled jobs are kept; 0
	// keeps them regardless of age. Defaults to 24h.
	RetainCompleted time.Duration
	// RetainDead is how long dead jobs are kept; 0 keeps them regardless of
	// age. Defaults to 168h (7 days).
	RetainDead time.Duration
	// MaxCompleted caps how many completed and cancelled jobs are kept; 0
	// means no cap. Defaults to 1000000.
	MaxCompleted int
	// MaxDead caps how many dead jobs are kept; 0 means no cap. Defaults to
	// 1000000.
	MaxDead int
	// PruneInterval is the time between retention passes. Defaults to 30s.
	PruneInterval time.Duration
	// ShutdownTimeout bounds a graceful shutdown. Defaults to 30s.
	ShutdownTimeout time.Duration
	// LogLevel is debug, info, warn or error. Defaults to info.
	LogLevel string
	// Auth requires a bearer token on every route but /healthz, /readyz
	// and /v1/openapi.json (docs/protocol.md, "Auth"). Defaults to false.
	Auth bool
	// AuthFile names a file of tokens, one per line as "name role
	// namespaces secret". Defaults to none.
	AuthFile string
	// AuthTokens holds more tokens in the same format, ";" or new lines
	// between them. It is read from SPOOL_AUTH_TOKENS only, never from a
	// flag or the config file, so that secrets stay out of process lists
	// and config files. Defaults to none.
	AuthTokens Secret
	// QueenCompat serves Queen's HTTP API v1 under /api/v1 beside Spool's
	// own, for Queen's clients (docs/queen.md), under the same auth.
	// Defaults to false.
	QueenCompat bool
	// AllowedHosts are the host names the server answers to besides
	// loopback names (localhost, *.localhost), IP addresses and the host
	// of Addr: "name", ".name" or "*.name" (the name and every name under
	// it), or "*" (every host). A request whose Host is none of these is
	// refused (421 host_not_allowed), so that a page of a DNS name pointed
	// at the server cannot use it (docs/protocol.md, "Allowed hosts").
	// Defaults to none.
	AllowedHosts []string
	// TrustedProxies are the addresses (CIDRs, or single IPs) of the
	// reverse proxies whose X-Forwarded-Proto the server believes: the
	// dashboard marks its session cookie Secure when a request came over
	// HTTPS, directly or through one of them. Defaults to none.
	TrustedProxies []netip.Prefix
}

// Default returns the defaults.
func Default() Config {
	return Config{
		Addr:            DefaultAddr,
		Data:            "./spool-data",
		Sync:            "full",
		MaxPayloadBytes: 1 << 20,
		MaxBodyBytes:    64 << 20,
		MaxBatch:        10_000,
		MaxEventReaders: 256,
		RetainCompleted: 24 * time.Hour,
		RetainDead:      7 * 24 * time.Hour,
		MaxCompleted:    1_000_000,
		MaxDead:         1_000_000,
		PruneInterval:   30 * time.Second,
		ShutdownTimeout: 30 * time.Second,
		LogLevel:        "info",
	}
}

// Validate checks every field once, at start-up.
func (c *Config) Validate() error {
	var errs []error
	if c.Addr == "" {
		errs = append(errs, errors.New("addr: must be HOST:PORT"))
	}
	if c.Data == "" {
		errs = append(errs, errors.New("data: must name a folder"))
	}
	if c.DB != "" && !strings.HasPrefix(c.DB, "postgres://") && !strings.HasPrefix(c.DB, "postgresql://") {
		errs = append(errs, errors.New("db: must be a postgres:// URL, or empty for the embedded store"))
	}
	if c.Sync != "full" && c.Sync != "normal" {
		errs = append(errs, fmt.Errorf("sync: %q is not full or normal", c.Sync))
	}
	if c.MaxPayloadBytes < 1 || c.MaxPayloadBytes > 64<<20 {
		errs = append(errs, errors.New("max-payload-bytes: must be between 1 and 67108864"))
	}
	if c.MaxBodyBytes < int64(c.MaxPayloadBytes) {
		errs = append(errs, errors.New("max-body-bytes: must be at least max-payload-bytes"))
	}
	if c.MaxBatch < 1 || c.MaxBatch > 100_000 {
		errs = append(errs, errors.New("max-batch: must be between 1 and 100000"))
	}
	if c.MaxEventReaders < 1 || c.MaxEventReaders > 100_000 {
		errs = append(errs, errors.New("max-event-readers: must be between 1 and 100000"))
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"retain-completed", c.RetainCompleted}, {"retain-dead", c.RetainDead}} {
		if d.v < 0 {
			errs = append(errs, fmt.Errorf("%s: must not be negative", d.name))
		}
	}
	if c.MaxCompleted < 0 || c.MaxDead < 0 {
		errs = append(errs, errors.New("max-completed, max-dead: must not be negative"))
	}
	if c.PruneInterval < time.Second {
		errs = append(errs, errors.New("prune-interval: must be at least 1s"))
	}
	if c.ShutdownTimeout <= 0 {
		errs = append(errs, errors.New("shutdown-timeout: must be positive"))
	}
	switch c.LogLevel {
	case "debug", "info", "warn", "error":
	default:
		errs = append(errs, fmt.Errorf("log-level: %q is not debug, info, warn or error", c.LogLevel))
	}
	if err := siteguard.CheckHosts(c.AllowedHosts); err != nil {
		errs = append(errs, fmt.Errorf("allowed-hosts: %w", err))
	}
	if c.Auth && c.AuthFile == "" && c.AuthTokens == "" {
		errs = append(errs, errors.New("auth: needs tokens from --auth-file or SPOOL_AUTH_TOKENS"))
	}
	return errors.Join(errs...)
}

// setting is one configurable field, known by the same name to the flag,
// the environment (SPOOL_ plus the name in upper case with underscores) and
// the file.
type setting struct {
	name  string
	usage string
	get   func(c *Config) string
	set   func(c *Config, v string) error
	// boolean settings are flags that need no value: --auth is --auth=true.
	boolean bool
}

func strVar(name, usage string, p func(c *Config) *string) setting {
	return setting{name: name, usage: usage,
		get: func(c *Config) string { return *p(c) },
		set: func(c *Config, v string) error { *p(c) = v; return nil }}
}

func boolVar(name, usage string, p func(c *Config) *bool) setting {
	return setting{name: name, usage: usage, boolean: true,
		get: func(c *Config) string { return strconv.FormatBool(*p(c)) },
		set: func(c *Config, v string) (err error) { *p(c), err = strconv.ParseBool(v); return err }}
}

func intVar(name, usage string, p func(c *Config) *int) setting {
	return setting{name: name, usage: usage,
		get: func(c *Config) string { return strconv.Itoa(*p(c)) },
		set: func(c *Config, v string) (err error) { *p(c), err = strconv.Atoi(v); return err }}
}

func int64Var(name, usage string, p func(c *Config) *int64) setting {
	return setting{name: name, usage: usage,
		get: func(c *Config) string { return strconv.FormatInt(*p(c), 10) },
		set: func(c *Config, v string) (err error) { *p(c), err = strconv.ParseInt(v, 10, 64); return err }}
}

func durVar(name, usage string, p func(c *Config) *time.Duration) setting {
	return setting{name: name, usage: usage,
		get: func(c *Config) string { return p(c).String() },
		set: func(c *Config, v string) (err error) { *p(c), err = time.ParseDuration(v); return err }}
}

// listVar is a setting of comma-separated values; blanks around each are
// dropped, and so are empty ones.
func listVar(name, usage string, p func(c *Config) *[]string) setting {
	return setting{name: name, usage: usage,
		get: func(c *Config) string { return strings.Join(*p(c), ",") },
		set: func(c *Config, v string) error { *p(c) = splitList(v); return nil }}
}

// prefixVar is a setting of comma-separated CIDRs; a single IP address
// stands for itself (a /32 or /128).
func prefixVar(name, usage string, p func(c *Config) *[]netip.Prefix) setting {
	return setting{name: name, usage: usage,
		get: func(c *Config) string {
			out := make([]string, len(*p(c)))
			for i, pr := range *p(c) {
				out[i] = pr.String()
			}
			return strings.Join(out, ",")
		},
		set: func(c *Config, v string) error {
			var out []netip.Prefix
			for _, s := range splitList(v) {
				pr, err := netip.ParsePrefix(s)
				if err != nil {
					addr, aerr := netip.ParseAddr(s)
					if aerr != nil {
						return fmt.Errorf("%q is not a CIDR (10.0.0.0/8) or an IP address", s)
					}
					pr = netip.PrefixFrom(addr, addr.BitLen())
				}
				out = append(out, pr.Masked())
			}
			*p(c) = out
			return nil
		}}
}

// splitList is the comma-separated values of v, trimmed, without empty
// ones.
func splitList(v string) []string {
	var out []string
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}

func settings() []setting {
	return []setting{
		strVar("addr", "HOST:PORT to listen on", func(c *Config) *string { return &c.Addr }),
		strVar("data", "data folder of the embedded store", func(c *Config) *string { return &c.Data }),
		strVar("db", "PostgreSQL URL (postgres://…) shared by several nodes; empty for the embedded store", func(c *Config) *string { return &c.DB }),
		strVar("sync", "commit durability: full (fsync, survives power loss) or normal (survives a process crash)", func(c *Config) *string { return &c.Sync }),
		intVar("max-payload-bytes", "largest payload, result or progress of one job", func(c *Config) *int { return &c.MaxPayloadBytes }),
		int64Var("max-body-bytes", "largest request body", func(c *Config) *int64 { return &c.MaxBodyBytes }),
		intVar("max-batch", "most jobs or items in one batch call", func(c *Config) *int { return &c.MaxBatch }),
		intVar("max-event-readers", "most GET /v1/events streams open at once", func(c *Config) *int { return &c.MaxEventReaders }),
		durVar("retain-completed", "how long completed and cancelled jobs are kept (0: no age limit)", func(c *Config) *time.Duration { return &c.RetainCompleted }),
		durVar("retain-dead", "how long dead jobs are kept (0: no age limit)", func(c *Config) *time.Duration { return &c.RetainDead }),
		intVar("max-completed", "most completed and cancelled jobs kept (0: no cap)", func(c *Config) *int { return &c.MaxCompleted }),
		intVar("max-dead", "most dead jobs kept (0: no cap)", func(c *Config) *int { return &c.MaxDead }),
		durVar("prune-interval", "time between retention passes", func(c *Config) *time.Duration { return &c.PruneInterval }),
		durVar("shutdown-timeout", "longest graceful shutdown", func(c *Config) *time.Duration { return &c.ShutdownTimeout }),
		strVar("log-level", "debug, info, warn or error", func(c *Config) *string { return &c.LogLevel }),
		boolVar("auth", "require a bearer token on every route but the health checks and the OpenAPI document", func(c *Config) *bool { return &c.Auth }),
		boolVar("queen-compat", "also serve Queen's HTTP API v1 under /api/v1, for Queen's clients (docs/queen.md)", func(c *Config) *bool { return &c.QueenCompat }),
		listVar("allowed-hosts", "host names the server answers to besides localhost, *.localhost, IP addresses and the host of --addr, comma-separated: name, .name or *.name (with every name under it), or * (any host)", func(c *Config) *[]string { return &c.AllowedHosts }),
		prefixVar("trusted-proxies", "CIDRs of the reverse proxies whose X-Forwarded-Proto is believed (the dashboard's cookie is Secure over HTTPS), comma-separated", func(c *Config) *[]netip.Prefix { return &c.TrustedProxies }),
		strVar("auth-file", `file of auth tokens, one per line: "name role namespaces secret" (more in env SPOOL_AUTH_TOKENS)`, func(c *Config) *string { return &c.AuthFile }),
	}
}

// flagText is the text of one flag, parsed later by its setting so that
// flags, environment and file share one parser.
type flagText struct {
	text    string
	boolean bool
}

func (f *flagText) String() string     { return f.text }
func (f *flagText) Set(v string) error { f.text = v; return nil }
func (f *flagText) IsBoolFlag() bool   { return f.boolean }

// Secret is a setting that must never be printed: it formats as
// "[redacted]" when set.
type Secret string

// String implements fmt.Stringer without revealing the secret.
func (s Secret) String() string {
	if s == "" {
		return ""
	}
	return "[redacted]"
}

// GoString implements fmt.GoStringer without revealing the secret.
func (s Secret) GoString() string { return s.String() }

// MarshalJSON implements json.Marshaler without revealing the secret.
func (s Secret) MarshalJSON() ([]byte, error) { return json.Marshal(s.String()) }

// EnvName is the environment variable of a setting: "max-batch" is
// SPOOL_MAX_BATCH.
func EnvName(name string) string {
	return "SPOOL_" + strings.ToUpper(strings.ReplaceAll(name, "-", "_"))
}

// Flag is one setting of `spool server` as a command line names it.
type Flag struct {
	Name    string
	Usage   string // ends with the setting's environment variable
	Default string // the value when nothing sets it, as text
	Bool    bool   // needs no value: --auth is --auth=true
}

// Flags lists the flags of `spool server` that Load reads, --config last:
// a command-line parser defines these and hands what was given to Load.
func Flags() []Flag {
	cfg := Default()
	var out []Flag
	for _, s := range settings() {
		out = append(out, Flag{Name: s.name, Usage: s.usage + " (env " + EnvName(s.name) + ")", Default: s.get(&cfg), Bool: s.boolean})
	}
	return append(out, Flag{Name: "config", Usage: configUsage})
}

// configUsage describes --config.
const configUsage = "optional JSON config file with the same names as keys (env SPOOL_CONFIG)"

// Load builds the Config from args (flags of `spool server`), the
// environment (getenv) and the JSON file named by --config or SPOOL_CONFIG,
// over the defaults, then validates it. Usage goes to usage.
func Load(args []string, getenv func(string) string, usage io.Writer) (Config, error) {
	cfg := Default()
	all := settings()
	fs := flag.NewFlagSet("spool server", flag.ContinueOnError)
	fs.SetOutput(usage)
	values := make(map[string]*string, len(all))
	for _, s := range all {
		v := &flagText{text: s.get(&cfg), boolean: s.boolean}
		fs.Var(v, s.name, s.usage+" (env "+EnvName(s.name)+")")
		values[s.name] = &v.text
	}
	configFile := fs.String("config", getenv("SPOOL_CONFIG"), configUsage)
	if err := fs.Parse(args); err != nil {
		return cfg, err
	}
	if fs.NArg() > 0 {
		return cfg, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	known := make(map[string]setting, len(all))
	for _, s := range all {
		known[s.name] = s
	}
	if *configFile != "" {
		if err := applyFile(&cfg, *configFile, known); err != nil {
			return cfg, err
		}
	}
	for _, s := range all {
		if v := getenv(EnvName(s.name)); v != "" {
			if err := s.set(&cfg, v); err != nil {
				return cfg, fmt.Errorf("%s=%q: %w", EnvName(s.name), v, err)
			}
		}
	}
	cfg.AuthTokens = Secret(getenv("SPOOL_AUTH_TOKENS"))
	var flagErr error
	fs.Visit(func(f *flag.Flag) {
		s, ok := known[f.Name]
		if !ok || flagErr != nil {
			return
		}
		if err := s.set(&cfg, *values[f.Name]); err != nil {
			flagErr = fmt.Errorf("--%s=%q: %w", f.Name, *values[f.Name], err)
		}
	})
	if flagErr != nil {
		return cfg, flagErr
	}
	return cfg, cfg.Validate()
}

func applyFile(cfg *Config, path string, known map[string]setting) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("read config file: %w", err)
	}
	var raw map[string]any
	if err := json.Unmarshal(data, &raw); err != nil {
		return fmt.Errorf("parse config file %s: %w", path, err)
	}
	keys := make([]string, 0, len(raw))
	for k := range raw {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		s, ok := known[k]
		if !ok {
			return fmt.Errorf("config file %s: unknown setting %q", path, k)
		}
		var v string
		switch x := raw[k].(type) {
		case string:
			v = x
		case bool:
			v = strconv.FormatBool(x)
		case float64:
			v = strconv.FormatFloat(x, 'f', -1, 64)
		case []any:
			parts := make([]string, len(x))
			for i, e := range x {
				s, ok := e.(string)
				if !ok {
					return fmt.Errorf("config file %s: %s must be a string, a number or a list of strings", path, k)
				}
				parts[i] = s
			}
			v = strings.Join(parts, ",")
		default:
			return fmt.Errorf("config file %s: %s must be a string, a number or a list of strings", path, k)
		}
		if err := s.set(cfg, v); err != nil {
			return fmt.Errorf("config file %s: %s=%q: %w", path, k, v, err)
		}
	}
	return nil
}
