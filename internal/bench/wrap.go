package bench

import (
	"fmt"
	"io"
	"strings"
	"unicode/utf8"
)

// maxWidth is the widest line, in characters, that the printouts write,
// so that they read in a terminal of 120 columns without wrapping.
const maxWidth = 120

// wrap splits text into lines of at most width characters, breaking
// between words; the first line starts with first and the others with
// hang. A word too long for a line of its own is cut, so that no line is
// ever wider than width.
func wrap(text string, width int, first, hang string) []string {
	var lines []string
	line, prefix := first, first
	for _, word := range strings.Fields(text) {
		for {
			room := width - utf8.RuneCountInString(line)
			if line != prefix {
				room-- // the space before the word
			}
			n := utf8.RuneCountInString(word)
			switch {
			case n <= room:
				if line != prefix {
					line += " "
				}
				line += word
				word = ""
			case line != prefix:
				lines = append(lines, line)
				line, prefix = hang, hang
				continue
			default:
				// A word wider than an empty line: cut it.
				cut := max(room, 1)
				i := 0
				for j := 0; j < cut; j++ {
					_, size := utf8.DecodeRuneInString(word[i:])
					i += size
				}
				lines = append(lines, line+word[:i])
				word = word[i:]
				line, prefix = hang, hang
				continue
			}
			break
		}
	}
	if line != prefix || len(lines) == 0 {
		lines = append(lines, line)
	}
	return lines
}

// printWrapped writes text wrapped at maxWidth, the first line starting
// with first and the others with hang; text that fits is written as it
// is, its spacing kept.
func printWrapped(w io.Writer, first, hang, text string) {
	if utf8.RuneCountInString(first+text) <= maxWidth && !strings.Contains(text, "\n") {
		fmt.Fprintln(w, strings.TrimRight(first+text, " "))
		return
	}
	for _, l := range wrap(text, maxWidth, first, hang) {
		fmt.Fprintln(w, strings.TrimRight(l, " "))
	}
}

// keyWidth is the width of the key column of a run's printout.
const keyWidth = 15

// printField writes one "key  value" line of a run's printout, the value
// wrapped under itself.
func printField(w io.Writer, key, value string) {
	printWrapped(w, fmt.Sprintf("%-*s", keyWidth, key), strings.Repeat(" ", keyWidth), value)
}
