package main

import (
	"fmt"
	"strings"
)

// closest returns the candidate nearest to name, for a "did you mean"
// hint: one that name is a prefix of, or one within a third of its length
// in edits (at least 2). It returns "" when none is near enough.
func closest(name string, candidates []string) string {
	best, bestDist := "", len(name)/3
	if bestDist < 2 {
		bestDist = 2
	}
	for _, c := range candidates {
		if c == name {
			continue
		}
		if name != "" && strings.HasPrefix(c, name) {
			return c
		}
		if d := editDistance(strings.ToLower(name), strings.ToLower(c)); d <= bestDist && (best == "" || d < editDistance(name, best)) {
			best, bestDist = c, d
		}
	}
	return best
}

// editDistance is the Levenshtein distance of a and b, with a swap of two
// neighbours counted as one edit ("emial" is one edit from "email").
func editDistance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	prev2 := make([]int, len(rb)+1)
	prev := make([]int, len(rb)+1)
	cur := make([]int, len(rb)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ra); i++ {
		cur[0] = i
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && ra[i-1] == rb[j-2] && ra[i-2] == rb[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(rb)]
}

// didYouMean is the hint "; did you mean X?" for a suggestion, quoted by
// quote, or "" for none.
func didYouMean(suggestion string, quote func(string) string) string {
	if suggestion == "" {
		return ""
	}
	return fmt.Sprintf("; did you mean %s?", quote(suggestion))
}
