package config

import (
	"io"
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

func env(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

func TestLoadDefaults(t *testing.T) {
	t.Parallel()
	cfg, err := Load(nil, env(nil), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(cfg, Default()) {
		t.Fatalf("got %+v, want defaults %+v", cfg, Default())
	}
	if cfg.Addr != "127.0.0.1:7311" || cfg.Data != "./spool-data" || cfg.Sync != "full" {
		t.Fatalf("unexpected defaults %+v", cfg)
	}
}

func TestLoadPrecedenceFlagsOverEnvOverFile(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "spool.json")
	if err := os.WriteFile(file, []byte(`{"addr":"127.0.0.1:1","data":"/from-file","max-batch":50,"retain-dead":"2h"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := Load([]string{"--config", file, "--addr", "127.0.0.1:3"},
		env(map[string]string{"SPOOL_ADDR": "127.0.0.1:2", "SPOOL_DATA": "/from-env", "SPOOL_MAX_EVENT_READERS": "7"}), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Addr != "127.0.0.1:3" {
		t.Errorf("addr = %q, want the flag's", cfg.Addr)
	}
	if cfg.Data != "/from-env" {
		t.Errorf("data = %q, want the env's", cfg.Data)
	}
	if cfg.MaxBatch != 50 || cfg.RetainDead != 2*time.Hour || cfg.MaxEventReaders != 7 {
		t.Errorf("file values not applied: %+v", cfg)
	}
}

func TestLoadRejectsBadValues(t *testing.T) {
	t.Parallel()
	cases := map[string]struct {
		args []string
		env  map[string]string
		want string
	}{
		"bad sync":          {args: []string{"--sync", "sometimes"}, want: "sync"},
		"bad duration":      {args: []string{"--retain-dead", "soon"}, want: "retain-dead"},
		"bad env number":    {env: map[string]string{"SPOOL_MAX_BATCH": "many"}, want: "SPOOL_MAX_BATCH"},
		"batch too large":   {args: []string{"--max-batch", "1000000"}, want: "max-batch"},
		"no event readers":  {args: []string{"--max-event-readers", "0"}, want: "max-event-readers"},
		"stray argument":    {args: []string{"extra"}, want: "unexpected argument"},
		"unknown flag":      {args: []string{"--nope", "1"}, want: "nope"},
		"negative retain":   {args: []string{"--retain-completed", "-1h"}, want: "retain-completed"},
		"tiny prune period": {args: []string{"--prune-interval", "1ms"}, want: "prune-interval"},
		"host with a port":  {args: []string{"--allowed-hosts", "a.example,b.example:80"}, want: "allowed-hosts"},
		"host with scheme":  {env: map[string]string{"SPOOL_ALLOWED_HOSTS": "https://a.example"}, want: "allowed-hosts"},
		"proxy not a CIDR":  {args: []string{"--trusted-proxies", "10.0.0.0/8,proxy.lan"}, want: "trusted-proxies"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			_, err := Load(tc.args, env(tc.env), io.Discard)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want one naming %q", err, tc.want)
			}
		})
	}
}

func TestLoadRejectsUnknownFileKey(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "spool.json")
	if err := os.WriteFile(file, []byte(`{"adress":"x"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := Load(nil, env(map[string]string{"SPOOL_CONFIG": file}), io.Discard)
	if err == nil || !strings.Contains(err.Error(), "adress") {
		t.Fatalf("err = %v, want unknown setting", err)
	}
}

// The lists of allowed hosts and trusted proxies come, like every
// setting, from a flag, SPOOL_ALLOWED_HOSTS / SPOOL_TRUSTED_PROXIES or
// the file (a string or a list of strings there), in that order of
// precedence.
func TestLoadHostsAndProxies(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "spool.json")
	if err := os.WriteFile(file, []byte(`{"allowed-hosts":["spool.example", "*.corp.example"],"trusted-proxies":"10.0.0.0/8"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := Load([]string{"--config", file}, env(nil), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"spool.example", "*.corp.example"}; !reflect.DeepEqual(cfg.AllowedHosts, want) {
		t.Errorf("allowed hosts from the file: %q, want %q", cfg.AllowedHosts, want)
	}
	if want := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}; !reflect.DeepEqual(cfg.TrustedProxies, want) {
		t.Errorf("trusted proxies from the file: %v, want %v", cfg.TrustedProxies, want)
	}
	cfg, err = Load([]string{"--config", file, "--trusted-proxies", "192.168.1.7, fd00::/8"},
		env(map[string]string{"SPOOL_ALLOWED_HOSTS": " .spool.example , "}), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{".spool.example"}; !reflect.DeepEqual(cfg.AllowedHosts, want) {
		t.Errorf("allowed hosts from the env: %q, want %q", cfg.AllowedHosts, want)
	}
	if want := []netip.Prefix{netip.MustParsePrefix("192.168.1.7/32"), netip.MustParsePrefix("fd00::/8")}; !reflect.DeepEqual(cfg.TrustedProxies, want) {
		t.Errorf("trusted proxies from the flag: %v, want %v", cfg.TrustedProxies, want)
	}
}
