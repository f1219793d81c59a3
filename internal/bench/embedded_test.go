package bench

import (
	"strings"
	"testing"
)

func TestWithoutSpoolEnv(t *testing.T) {
	t.Parallel()
	got := withoutSpoolEnv([]string{"PATH=/bin", "SPOOL_DB=postgres://x", "HOME=/root", "SPOOL_AUTH=true", "XSPOOL_A=1"})
	if strings.Join(got, " ") != "PATH=/bin HOME=/root XSPOOL_A=1" {
		t.Fatalf("env %q", got)
	}
}
