package job

import (
	"strings"
	"testing"
)

func TestValidTraceParent(t *testing.T) {
	t.Parallel()
	const good = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	cases := map[string]bool{
		good: true,
		"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00": true,
		"00-00000000000000000000000000000001-0000000000000001-ff": true,
		"":                    false,
		"01" + good[2:]:       false, // another version
		"ff" + good[2:]:       false,
		strings.ToUpper(good): false,
		good[:54]:             false,
		good + "-00":          false, // a later version's extra field
		good + " ":            false,
		"00-00000000000000000000000000000000-00f067aa0ba902b7-01": false, // zero trace id
		"00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01": false, // zero parent id
		"00_4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01": false,
		"00-4bf92f3577b34da6a3ce929d0e0e4736_00f067aa0ba902b7-01": false,
		"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7_01": false,
		"00-4bf92f3577b34da6a3ce929d0e0e473g-00f067aa0ba902b7-01": false,
		"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-0x": false,
	}
	for s, want := range cases {
		if got := ValidTraceParent(s); got != want {
			t.Errorf("ValidTraceParent(%q) = %v, want %v", s, got, want)
		}
	}
}

func TestWorkerName(t *testing.T) {
	t.Parallel()
	cases := map[string]string{
		"":                  "",
		"host-1/pid-77":     "host-1/pid-77",
		"ünïcode ✓":         "ünïcode ✓",
		"a\x00b":            "a\uFFFDb",
		"bad\xffutf8":       "bad\uFFFDutf8",
		"\x00\xff\xfe\x00x": "\uFFFD\uFFFD\uFFFDx",
	}
	for in, want := range cases {
		if got := WorkerName(in); got != want {
			t.Errorf("WorkerName(%q) = %q, want %q", in, got, want)
		}
	}
}
