package testenv

import (
	"errors"
	"testing"
)

// outcome records how Missing ended a test, in place of the testing
// package's Skip and Fatal, which would end this test itself.
type outcome struct {
	testing.TB
	skipped, failed bool
}

func (o *outcome) Helper()               {}
func (o *outcome) Skipf(string, ...any)  { o.skipped = true }
func (o *outcome) Fatalf(string, ...any) { o.failed = true }

// A missing dependency skips a test unless SPOOL_TEST_REQUIRE_ALL is set,
// and then fails it; values that say "off" keep it a skip.
func TestMissingSkipsUnlessRequired(t *testing.T) {
	for _, c := range []struct {
		value string
		fail  bool
	}{{"", false}, {"0", false}, {"false", false}, {"1", true}, {"true", true}, {"yes", true}} {
		t.Setenv(RequireAllVar, c.value)
		o := &outcome{}
		Missing(o, "PostgreSQL", errors.New("no initdb"))
		if o.failed != c.fail || o.skipped == c.fail {
			t.Errorf("%s=%q: skipped %v, failed %v; want failed %v", RequireAllVar, c.value, o.skipped, o.failed, c.fail)
		}
	}
}
