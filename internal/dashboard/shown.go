package dashboard

import (
	"encoding/json"
	"strings"
	"unicode/utf8"
)

// Bounds of what a page shows of the text a job carries (its payload,
// result, progress and errors: user data of any size and shape). Every
// bound counts the bytes the page sends, after html/template escapes them,
// so that a value of quotes and ampersands shows less text, not a bigger
// page.
const (
	// maxShownJSON bounds the text shown of one JSON value.
	maxShownJSON = 32 << 10
	// maxShownDepth is how deep a JSON value is shown indented: what lies
	// deeper is shown compact, on the line of its container, so that the
	// indentation of a line never passes 2*maxShownDepth spaces.
	maxShownDepth = 16
	// maxShownErrors bounds the failed attempts the job page lists: the
	// latest ones.
	maxShownErrors = 10
	// maxShownError bounds the text shown of one error message.
	maxShownError = 2 << 10
)

// shown is a bounded view of a text: what a page shows of it, and how
// many bytes of it were left out.
type shown struct {
	Text string
	// More counts the bytes of the original text left out (of the JSON
	// as stored, for a JSON value); zero when the text is whole.
	More int
}

// escapedLen is how many bytes html/template writes for the byte c of
// text: the characters it escapes become entities, a NUL U+FFFD.
var escapedLen = func() [utf8.RuneSelf]int {
	var t [utf8.RuneSelf]int
	for c := range t {
		t[c] = 1
	}
	for _, c := range `"&'+` {
		t[c] = 5 // &#34; &amp; &#39; &#43;
	}
	t['<'], t['>'], t[0] = 4, 4, 3 // &lt; &gt; U+FFFD
	return t
}()

// boundedText writes text up to a budget of escaped bytes.
type boundedText struct {
	b      strings.Builder
	budget int
	// full is set once a write did not fit.
	full bool
}

// write writes as much of s as fits, on a character boundary, and
// returns how many bytes of s it wrote.
func (t *boundedText) write(s string) int {
	if t.full {
		return 0
	}
	i := 0
	for i < len(s) {
		cost, size := 0, 1
		if c := s[i]; c < utf8.RuneSelf {
			cost = escapedLen[c]
		} else {
			var r rune
			r, size = utf8.DecodeRuneInString(s[i:])
			cost = size
			if r == utf8.RuneError && size == 1 {
				cost = 3 // written as U+FFFD
			}
		}
		if cost > t.budget {
			t.full = true
			break
		}
		t.budget -= cost
		i += size
	}
	t.b.WriteString(s[:i])
	return i
}

// clip is s cut at max escaped bytes.
func clip(max int, s string) shown {
	t := boundedText{budget: max}
	n := t.write(s)
	return shown{Text: t.b.String(), More: len(s) - n}
}

// prettyJSON shows raw indented two spaces a level down to maxShownDepth
// and compact below, cut at maxShownJSON escaped bytes. It reads raw once,
// left to right, and stops where the cut falls, so its cost is linear in
// what it shows, whatever the shape of the value. Anything that is not
// JSON is shown as it is, cut at the same bound.
func prettyJSON(raw json.RawMessage) shown {
	if len(raw) == 0 {
		return shown{}
	}
	if !json.Valid(raw) {
		return clip(maxShownJSON, string(raw))
	}
	s := string(raw)
	t := boundedText{budget: maxShownJSON}
	depth := 0
	newline := func(level int) {
		t.write("\n")
		t.write(indent[:2*min(level, maxShownDepth)])
	}
	i := 0
	for i < len(s) && !t.full {
		switch c := s[i]; c {
		case ' ', '\t', '\n', '\r':
			i++
		case '{', '[':
			end := byte('}')
			if c == '[' {
				end = ']'
			}
			if k := skipSpace(s, i+1); s[k] == end {
				// An empty object or array stays on one line.
				if t.write(string(c)) == 1 && t.write(string(end)) == 1 {
					i = k + 1
				}
				break
			}
			if t.write(s[i:i+1]) == 1 {
				i++
			}
			depth++
			if depth <= maxShownDepth {
				newline(depth)
			}
		case '}', ']':
			if depth <= maxShownDepth {
				newline(depth - 1)
			}
			depth--
			if t.write(s[i:i+1]) == 1 {
				i++
			}
		case ',':
			if t.write(",") == 1 {
				i++
			}
			if depth <= maxShownDepth {
				newline(depth)
			}
		case ':':
			if t.write(":") == 1 {
				i++
			}
			if depth <= maxShownDepth {
				t.write(" ")
			}
		case '"':
			end := stringEnd(s, i)
			i += t.write(s[i:end])
		default: // a number, true, false or null
			end := i
			for end < len(s) && !strings.ContainsRune(" \t\n\r,:]}", rune(s[end])) {
				end++
			}
			i += t.write(s[i:end])
		}
	}
	// What is left past the cut is counted as stored, whitespace aside
	// at the end.
	more := len(strings.TrimRight(s[i:], " \t\n\r"))
	return shown{Text: t.b.String(), More: more}
}

// indent is the deepest indentation prettyJSON writes.
var indent = strings.Repeat(" ", 2*maxShownDepth)

// skipSpace is the index of the first byte of s at or after i that is not
// JSON whitespace; s is valid JSON, so there is one.
func skipSpace(s string, i int) int {
	for i < len(s) && strings.IndexByte(" \t\n\r", s[i]) >= 0 {
		i++
	}
	return i
}

// stringEnd is the index just past the JSON string that starts at s[i]
// (a quote); s is valid JSON, so the string ends.
func stringEnd(s string, i int) int {
	for j := i + 1; j < len(s); j++ {
		switch s[j] {
		case '\\':
			j++
		case '"':
			return j + 1
		}
	}
	return len(s)
}
