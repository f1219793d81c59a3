package config

import (
	"io"
	"os"
	"path/filepath"
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
	if cfg != Default() {
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
