// Package humanize writes numbers the way people read them, for the
// reports of spool bench and the dashboard's pages.
package humanize

import (
	"strconv"
	"strings"
)

// Int writes n with a comma between each group of three digits:
// 1234567 is "1,234,567".
func Int(n int64) string {
	s := strconv.FormatInt(n, 10)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	if neg {
		b.WriteByte('-')
	}
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}
