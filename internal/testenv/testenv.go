// Package testenv decides what a test does when the machine lacks
// something it needs from outside Go: a PostgreSQL server, a headless
// Chromium, root. By default the test skips and says what is missing and
// how to get it, so that `go test ./...` passes on a laptop without them.
// With SPOOL_TEST_REQUIRE_ALL=1 (scripts/test sets it) the test fails
// instead, so that a full run never passes by skipping.
//
// Whether a dependency is there is decided by the helper that uses it
// (internal/pgtest for PostgreSQL, the dashboard's browser tests for
// Chromium, the torture tests for root); whether its absence skips or
// fails is decided here, once.
package testenv

import (
	"os"
	"testing"
)

// RequireAllVar is the environment variable that makes every test
// required: set to 1, a test whose dependency is missing fails.
const RequireAllVar = "SPOOL_TEST_REQUIRE_ALL"

// RequireAll reports whether RequireAllVar is set to anything but empty,
// "0" or "false": a value mistyped errs on the side of requiring.
func RequireAll() bool {
	switch os.Getenv(RequireAllVar) {
	case "", "0", "false":
		return false
	}
	return true
}

// Missing ends tb because what is missing: it skips tb, or fails it when
// RequireAll. why says what was looked for and how to get it.
func Missing(tb testing.TB, what string, why error) {
	tb.Helper()
	if RequireAll() {
		tb.Fatalf("%s is required (%s is set) but missing: %v", what, RequireAllVar, why)
	} else {
		tb.Skipf("%s missing, so this test skips (%s=1, as scripts/test sets, makes it fail): %v", what, RequireAllVar, why)
	}
}
