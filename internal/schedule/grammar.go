package schedule

import (
	"fmt"
	"strconv"
	"strings"
)

// The ranges and steps of a cron expression follow Vixie cron's
// crontab(5), as cronie keeps it, the cron of most Linux systems and the
// grammar most people write by hand:
//   - a range a-b runs from a up to b: a range whose start lies after its
//     end (1-0, FRI-MON) is refused, not read as wrapping around;
//   - a step /n (n ≥ 1) follows * or a range, and takes every n-th value
//     of it from its start; a step larger than the range is allowed and
//     takes its start only (*/12 in the month field is January);
//   - a step after a single value (5/15) is refused.
//
// The parser (github.com/netresearch/go-cron) reads reversed ranges as
// wrapping around and refuses steps as large as their range, so crontab
// checks every item of these forms first, with errors that name the
// field, and hands the parser a step larger than its range as the single
// value it takes.

// cronField is one field of a cron expression.
type cronField struct {
	name     string
	min, max int
	// names are the names its values may have (months, days), in lower
	// case.
	names map[string]int
}

// cronFields are the six fields of an expression with seconds; one of
// five fields starts with the minutes.
var cronFields = []cronField{
	{name: "second", max: 59},
	{name: "minute", max: 59},
	{name: "hour", max: 23},
	{name: "day-of-month", min: 1, max: 31},
	{name: "month", min: 1, max: 12, names: map[string]int{"jan": 1, "feb": 2, "mar": 3, "apr": 4, "may": 5, "jun": 6,
		"jul": 7, "aug": 8, "sep": 9, "oct": 10, "nov": 11, "dec": 12}},
	{name: "day-of-week", max: 7, names: map[string]int{"sun": 0, "mon": 1, "tue": 2, "wed": 3, "thu": 4, "fri": 5, "sat": 6}},
}

// grammarError is a field of an expression that the rules of ranges and
// steps above refuse.
type grammarError struct {
	field, value, why string
}

func (e *grammarError) Error() string {
	return fmt.Sprintf("the %s field %q: %s", e.field, e.value, e.why)
}

// crontab checks the ranges and steps of a cron expression of five or
// six fields and returns it as the parser is to read it, or the field at
// fault. Items of other forms (and expressions of another number of
// fields) are left for the parser to judge.
func crontab(expr string) (string, *grammarError) {
	fields := strings.Fields(expr)
	var of []cronField
	switch len(fields) {
	case 5:
		of = cronFields[1:]
	case 6:
		of = cronFields
	default:
		return expr, nil
	}
	changed := false
	for i, field := range fields {
		items := strings.Split(field, ",")
		for k, item := range items {
			read, err := of[i].item(item)
			if err != nil {
				return "", &grammarError{field: of[i].name, value: field, why: err.Error()}
			}
			if read != item {
				items[k], changed = read, true
			}
		}
		fields[i] = strings.Join(items, ",")
	}
	if !changed {
		return expr, nil
	}
	return strings.Join(fields, " "), nil
}

// item checks one item of f's list (a value, a range, * or ?, each with
// an optional step) and returns it as the parser is to read it.
func (f cronField) item(item string) (string, error) {
	base, step, stepped := strings.Cut(item, "/")
	lo, hi := f.min, f.max
	switch a, b, ranged := strings.Cut(base, "-"); {
	case base == "*" || base == "?":
	case ranged:
		var okA, okB bool
		lo, okA = f.value(a)
		hi, okB = f.value(b)
		if !okA || !okB {
			return item, nil
		}
		if err := f.bounds(lo, hi); err != nil {
			return "", err
		}
		if lo > hi {
			return "", fmt.Errorf("the range %s runs backwards (a range goes up from its start; write %s to wrap around)",
				base, f.wrapped(lo, hi))
		}
	default:
		v, ok := f.value(base)
		if !ok {
			return item, nil
		}
		if err := f.bounds(v, v); err != nil {
			return "", err
		}
		if stepped {
			return "", fmt.Errorf("%s steps from a single value (a step follows * or a range: %s-%d/%s)", item, base, f.max, step)
		}
		return item, nil
	}
	if !stepped {
		return item, nil
	}
	n, err := strconv.Atoi(step)
	if err != nil || n < 1 || !digits(step) {
		return "", fmt.Errorf("the step of %s is not a whole number of at least 1", item)
	}
	if n > 1 && n > hi-lo {
		// Larger than the range: its start only, which the parser
		// would refuse in this form.
		return strconv.Itoa(lo), nil
	}
	return item, nil
}

// wrapped writes the values from lo up to f's end and on from its start
// up to hi as a list of two ranges.
func (f cronField) wrapped(lo, hi int) string {
	last := f.max
	if f.name == "day-of-week" {
		last = 6 // 7 is Sunday again
	}
	span := func(a, b int) string {
		if a == b {
			return strconv.Itoa(a)
		}
		return strconv.Itoa(a) + "-" + strconv.Itoa(b)
	}
	if lo > last {
		return span(f.min, hi)
	}
	return span(lo, last) + "," + span(f.min, hi)
}

// value reads one value of f, a number or a name; ok is false for
// anything else, which the parser is left to judge.
func (f cronField) value(s string) (v int, ok bool) {
	if n, named := f.names[strings.ToLower(s)]; named {
		return n, true
	}
	if !digits(s) || len(s) > 9 {
		return 0, false
	}
	n, err := strconv.Atoi(s)
	return n, err == nil
}

// bounds refuses values outside f.
func (f cronField) bounds(values ...int) error {
	for _, v := range values {
		if v < f.min || v > f.max {
			return fmt.Errorf("%d is outside %d-%d", v, f.min, f.max)
		}
	}
	return nil
}

// digits reports whether s is one or more ASCII digits.
func digits(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}
