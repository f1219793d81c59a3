package job

import (
	"strings"
	"unicode/utf8"
)

// TraceParentLength is the length of a W3C traceparent of version 00:
// "00-" + 32 hex digits + "-" + 16 hex digits + "-" + 2 hex digits.
const TraceParentLength = 55

// ValidTraceParent reports whether s is a W3C trace context traceparent
// (https://www.w3.org/TR/trace-context/#traceparent-header) of version
// 00: "00-<trace id>-<parent id>-<flags>", of 32, 16 and 2 lower-case hex
// digits, neither id all zeros. A job carries it so that the work it
// starts continues the trace of the request that enqueued it; Spool
// keeps it as given and never reads it.
func ValidTraceParent(s string) bool {
	if len(s) != TraceParentLength || s[:3] != "00-" || s[35] != '-' || s[52] != '-' {
		return false
	}
	traceID, parentID, flags := s[3:35], s[36:52], s[53:]
	return lowerHex(traceID) && lowerHex(parentID) && lowerHex(flags) &&
		strings.Trim(traceID, "0") != "" && strings.Trim(parentID, "0") != ""
}

// lowerHex reports whether s holds lower-case hex digits only.
func lowerHex(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// MaxWorkerBytes bounds the name a fetch gives its worker (free text, for
// display), as the fetch sends it.
const MaxWorkerBytes = 256

// WorkerName is the form in which a worker's name is kept and compared:
// the name as sent, with invalid UTF-8 and NUL (which not every store can
// keep) each replaced by U+FFFD, as ErrorMessage keeps an error's text.
// A name of at most MaxWorkerBytes bytes may come out longer, never more
// than three times as long.
func WorkerName(name string) string {
	if !utf8.ValidString(name) {
		name = strings.ToValidUTF8(name, "\uFFFD")
	}
	if strings.IndexByte(name, 0) >= 0 {
		name = strings.ReplaceAll(name, "\x00", "\uFFFD")
	}
	return name
}
