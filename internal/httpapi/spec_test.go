package httpapi

import (
	"bytes"
	"encoding/json"
	"regexp"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// This file restates the request rules of docs/protocol.md as plain
// checks, written apart from the handlers, so that the fuzz targets can
// compare what the server accepts with what the protocol allows.

// specName is the protocol's name rule.
var specName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.:\-]{0,127}$`)

// specLimits are the protocol's numeric limits in milliseconds and counts.
const (
	specYearMS     = 31_536_000_000
	specDayMS      = 86_400_000
	specMinLeaseMS = 100
)

// specObject reads body as the protocol's request: UTF-8, exactly one JSON
// object. It returns nil when the body is not one.
func specObject(body []byte) map[string]json.RawMessage {
	if !utf8.Valid(body) {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	var m map[string]json.RawMessage
	if err := dec.Decode(&m); err != nil || m == nil {
		return nil
	}
	if len(bytes.Trim(body[dec.InputOffset():], " \t\r\n")) > 0 || !specUnique(body) {
		return nil // something follows the object, or a key repeats
	}
	return m
}

// specUnique reports whether the object raw names no key twice (at its
// own level; nested objects are checked when they are read).
func specUnique(raw []byte) bool {
	dec := json.NewDecoder(bytes.NewReader(raw))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return false
	}
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return false
		}
		key, _ := tok.(string)
		if seen[key] {
			return false
		}
		seen[key] = true
		var skip json.RawMessage
		if dec.Decode(&skip) != nil {
			return false
		}
	}
	return true
}

// specFields reports whether m holds only the given keys, none of them
// null unless listed in nullable.
func specFields(m map[string]json.RawMessage, keys []string, nullable ...string) bool {
	for k, v := range m {
		if !contains(keys, k) {
			return false
		}
		if string(v) == "null" && !contains(nullable, k) {
			return false
		}
	}
	return true
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// specInt reads an integer field that, when present, must lie in lo..hi.
func specInt(m map[string]json.RawMessage, key string, lo, hi int64) (int64, bool) {
	raw, ok := m[key]
	if !ok {
		return 0, true
	}
	n, err := strconv.ParseInt(string(raw), 10, 64)
	return n, err == nil && n >= lo && n <= hi
}

// specString reads a string field, which must be valid Unicode: an
// escape of half a UTF-16 surrogate pair is not (encoding/json would read
// it as U+FFFD), except in a failed attempt's error, free text kept with
// U+FFFD in its place.
func specString(m map[string]json.RawMessage, key string) (s string, present, ok bool) {
	raw, present := m[key]
	if !present {
		return "", false, true
	}
	ok = len(raw) > 0 && raw[0] == '"' && json.Unmarshal(raw, &s) == nil
	return s, true, ok && (key == "error" || !specHalfSurrogate(raw))
}

// specHalfSurrogate reports whether the JSON string raw escapes half of a
// UTF-16 surrogate pair without its other half.
func specHalfSurrogate(raw []byte) bool {
	unit := func(i int) (uint64, bool) { // the \uXXXX escape at raw[i:], if any
		if i+6 > len(raw) || raw[i] != '\\' || raw[i+1] != 'u' {
			return 0, false
		}
		u, err := strconv.ParseUint(string(raw[i+2:i+6]), 16, 16)
		return u, err == nil
	}
	for i := 0; i < len(raw); i++ {
		if raw[i] != '\\' {
			continue
		}
		u, ok := unit(i)
		switch {
		case !ok:
			i++ // a two-character escape such as \\ or \"
		case u >= 0xD800 && u <= 0xDBFF:
			if low, ok := unit(i + 6); !ok || low < 0xDC00 || low > 0xDFFF {
				return true
			}
			i += 11
		case u >= 0xDC00 && u <= 0xDFFF:
			return true
		default:
			i += 5
		}
	}
	return false
}

// specNameField reads an optional name field.
func specNameField(m map[string]json.RawMessage, key string) (string, bool) {
	s, present, ok := specString(m, key)
	return s, ok && (!present || specName.MatchString(s))
}

func specBool(m map[string]json.RawMessage, key string) bool {
	raw, ok := m[key]
	return !ok || string(raw) == "true" || string(raw) == "false"
}

func specArray(raw json.RawMessage) ([]json.RawMessage, bool) {
	var a []json.RawMessage
	if len(raw) == 0 || raw[0] != '[' || json.Unmarshal(raw, &a) != nil {
		return nil, false
	}
	return a, true
}

func specSubObject(raw json.RawMessage) map[string]json.RawMessage {
	var m map[string]json.RawMessage
	if len(raw) == 0 || raw[0] != '{' || json.Unmarshal(raw, &m) != nil || !specUnique(raw) {
		return nil
	}
	return m
}

var specJobFields = []string{"id", "queue", "kind", "payload", "priority", "run_at", "delay_ms", "max_attempts",
	"backoff", "lease_ms", "unique_key", "unique_for_ms", "tags", "group", "durability", "traceparent"}

// specTraceParent is the protocol's traceparent: version 00, a 32-digit
// trace id and a 16-digit parent id, neither all zeros, and 2 digits of
// flags, all hex in lower case.
var specTraceParent = regexp.MustCompile(`^00-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}$`)

// specTrace reads an optional traceparent field.
func specTrace(m map[string]json.RawMessage) bool {
	tp, present, ok := specString(m, "traceparent")
	return ok && (!present || specTraceParent.MatchString(tp) &&
		tp[3:35] != strings.Repeat("0", 32) && tp[36:52] != strings.Repeat("0", 16))
}

// specGroup reads an optional job group: 1-256 bytes of Unicode
// without NUL when present.
func specGroup(m map[string]json.RawMessage) bool {
	g, present, ok := specString(m, "group")
	return ok && (!present || len(g) >= 1 && len(g) <= 256 && !strings.Contains(g, "\x00"))
}

// specDurabilities are the protocol's durability levels.
var specDurabilities = []string{"full", "process", "memory"}

// specDurability reads an optional durability field: one of the levels
// when present.
func specDurability(m map[string]json.RawMessage) (string, bool) {
	d, present, ok := specString(m, "durability")
	return d, ok && (!present || contains(specDurabilities, d))
}

// specJob reports whether m is a job the protocol lets a client enqueue
// at now.
func specJob(m map[string]json.RawMessage, now time.Time) bool {
	if m == nil || !specFields(m, specJobFields, "payload") {
		return false
	}
	id, ok := specNameField(m, "id")
	if !ok || contains([]string{"batch", "ack", "fail", "extend", "release"}, id) {
		return false
	}
	if _, ok := specNameField(m, "queue"); !ok {
		return false
	}
	if kind, ok := specNameField(m, "kind"); !ok || kind == "" {
		return false
	}
	if _, ok := specInt(m, "priority", -1000, 1000); !ok {
		return false
	}
	delay, ok := specInt(m, "delay_ms", 0, specYearMS)
	if !ok {
		return false
	}
	if raw, present := m["run_at"]; present {
		var t time.Time
		if raw[0] != '"' || json.Unmarshal(raw, &t) != nil || t.After(now.Add(365*24*time.Hour)) {
			return false
		}
		if delay != 0 && !t.IsZero() {
			return false
		}
	}
	if _, ok := specInt(m, "max_attempts", 1, 1000); !ok {
		return false
	}
	if _, ok := specDurability(m); !ok || !specGroup(m) || !specTrace(m) {
		return false
	}
	if _, ok := specInt(m, "lease_ms", specMinLeaseMS, specDayMS); !ok {
		return false
	}
	key, present, ok := specString(m, "unique_key")
	if !ok || (present && (len(key) < 1 || len(key) > 256)) {
		return false
	}
	uniqueFor, ok := specInt(m, "unique_for_ms", 0, specYearMS)
	if !ok || (uniqueFor > 0 && !present) {
		return false
	}
	if raw, present := m["tags"]; present {
		tags, ok := specArray(raw)
		if !ok || len(tags) > 32 {
			return false
		}
		for _, t := range tags {
			var s string
			if t[0] != '"' || json.Unmarshal(t, &s) != nil || !specName.MatchString(s) {
				return false
			}
		}
	}
	if raw, present := m["backoff"]; present {
		b := specSubObject(raw)
		if b == nil || !specFields(b, []string{"type", "base_ms", "max_ms", "jitter"}) {
			return false
		}
		if typ, present, ok := specString(b, "type"); !ok || (present && typ != "fixed" && typ != "exponential") {
			return false
		}
		base, ok := specInt(b, "base_ms", 0, specDayMS)
		if !ok {
			return false
		}
		if _, present := b["base_ms"]; !present {
			base = 1000
		}
		if _, ok := specInt(b, "max_ms", base, specYearMS); !ok {
			return false
		}
		if raw, present := b["jitter"]; present {
			j, err := strconv.ParseFloat(string(raw), 64)
			if err != nil || raw[0] == '"' || j < 0 || j > 1 {
				return false
			}
		}
	}
	return true
}

// specEnqueue reports whether body is a valid POST /v1/jobs.
func specEnqueue(body []byte, now time.Time) bool {
	return specJob(specObject(body), now)
}

// specEnqueueBatch reports whether body is a valid POST /v1/jobs/batch.
func specEnqueueBatch(body []byte, now time.Time) bool {
	m := specObject(body)
	if m == nil || !specFields(m, []string{"jobs"}) {
		return false
	}
	jobs, ok := specArray(m["jobs"])
	if !ok || len(jobs) < 1 || len(jobs) > 10_000 {
		return false
	}
	memory := 0
	for _, raw := range jobs {
		m := specSubObject(raw)
		if !specJob(m, now) {
			return false
		}
		if d, _ := specDurability(m); d == "memory" {
			memory++
		}
	}
	// Memory jobs may not share a batch with others. A job that names no
	// level takes its queue's, which the fuzz targets leave at full.
	return memory == 0 || memory == len(jobs)
}

// specFetch reports whether body is a valid POST /v1/fetch.
func specFetch(body []byte) bool {
	m := specObject(body)
	if m == nil || !specFields(m, []string{"queues", "max", "wait_ms", "lease_ms", "worker", "group"}) {
		return false
	}
	queues, ok := specArray(m["queues"])
	if !ok || len(queues) < 1 || len(queues) > 100 {
		return false
	}
	for _, q := range queues {
		var s string
		if q[0] != '"' || json.Unmarshal(q, &s) != nil || !specName.MatchString(s) {
			return false
		}
	}
	if _, ok := specInt(m, "max", 1, 1000); !ok {
		return false
	}
	if _, ok := specInt(m, "wait_ms", 0, 60_000); !ok {
		return false
	}
	if _, ok := specInt(m, "lease_ms", specMinLeaseMS, specDayMS); !ok {
		return false
	}
	if !specGroup(m) {
		return false
	}
	worker, _, ok := specString(m, "worker")
	return ok && len(worker) <= 256
}

// specLeaseOps are the fields of each lease holder's call besides id.
var specLeaseOps = map[string][]string{
	"ack":      {"token", "result"},
	"fail":     {"token", "error", "no_retry", "retry_after_ms"},
	"extend":   {"token", "lease_ms"},
	"release":  {"token"},
	"progress": {"token", "progress"},
}

// specLeaseItem reports whether m is a valid body of op, with an id when
// withID is set (a batch item).
func specLeaseItem(op string, m map[string]json.RawMessage, withID bool) bool {
	keys := specLeaseOps[op]
	if withID {
		keys = append([]string{"id"}, keys...)
	}
	if m == nil || !specFields(m, keys, "result", "progress") {
		return false
	}
	if withID {
		if id, ok := specNameField(m, "id"); !ok || id == "" {
			return false
		}
	}
	if _, present := m["token"]; !present {
		return false
	}
	if _, ok := specInt(m, "token", 1, 1<<63-1); !ok {
		return false
	}
	if _, _, ok := specString(m, "error"); !ok {
		return false
	}
	if _, ok := specInt(m, "retry_after_ms", 0, specYearMS); !ok || !specBool(m, "no_retry") {
		return false
	}
	_, ok := specInt(m, "lease_ms", specMinLeaseMS, specDayMS)
	return ok
}

// specLeaseOne reports whether body is a valid single-job call of op on
// the job id: the body of a batch item, where an id, if given, must be
// the path's.
func specLeaseOne(op string, body []byte, id string) bool {
	m := specObject(body)
	if m == nil {
		return false
	}
	if raw, present := m["id"]; present && op != "progress" {
		var s string
		if raw[0] != '"' || json.Unmarshal(raw, &s) != nil || (s != "" && s != id) {
			return false
		}
		delete(m, "id")
	}
	return specLeaseItem(op, m, false)
}

// specLeaseBatch reports whether body is a valid batch call of op.
func specLeaseBatch(op string, body []byte) bool {
	m := specObject(body)
	if m == nil || !specFields(m, []string{"items"}) {
		return false
	}
	items, ok := specArray(m["items"])
	if !ok || len(items) < 1 || len(items) > 10_000 {
		return false
	}
	for _, raw := range items {
		if !specLeaseItem(op, specSubObject(raw), true) {
			return false
		}
	}
	return true
}

// specTransaction reports whether body is a valid POST /v1/transactions
// that the fuzz harness could serve: ack and fail items as the batch
// routes take them, jobs as a batch enqueue takes them, at least one item,
// no job named twice, and no job of memory durability beside a leased job
// (the harness's only leased job is durable) or a job of another level.
func specTransaction(body []byte, now time.Time) bool {
	m := specObject(body)
	if m == nil || !specFields(m, []string{"ack", "fail", "enqueue"}) {
		return false
	}
	lists := map[string][]json.RawMessage{}
	for _, key := range []string{"ack", "fail", "enqueue"} {
		if raw, present := m[key]; present {
			items, ok := specArray(raw)
			if !ok || len(items) > 10_000 {
				return false
			}
			lists[key] = items
		}
	}
	leased := len(lists["ack"]) + len(lists["fail"])
	if leased+len(lists["enqueue"]) == 0 {
		return false
	}
	ids := map[string]bool{}
	for _, op := range []string{"ack", "fail"} {
		for _, raw := range lists[op] {
			item := specSubObject(raw)
			if !specLeaseItem(op, item, true) {
				return false
			}
			id, _ := specNameField(item, "id")
			if ids[id] {
				return false
			}
			ids[id] = true
		}
	}
	memory := 0
	for _, raw := range lists["enqueue"] {
		job := specSubObject(raw)
		if !specJob(job, now) {
			return false
		}
		if d, _ := specDurability(job); d == "memory" {
			memory++
		}
	}
	return memory == 0 || (memory == len(lists["enqueue"]) && leased == 0)
}

// specBulk reports whether body is a valid bulk retry (retry is set) or
// delete of a queue's jobs.
func specBulk(body []byte, retry bool) bool {
	m := specObject(body)
	if m == nil || !specFields(m, []string{"state"}) {
		return false
	}
	state, present, ok := specString(m, "state")
	if !ok || !present {
		return false
	}
	if retry {
		return contains([]string{"dead", "cancelled", "retrying", "scheduled"}, state)
	}
	return contains([]string{"scheduled", "available", "retrying", "completed", "dead", "cancelled"}, state)
}

// specQueueDurability reports whether body is a valid POST
// /v1/queues/{name}/durability.
func specQueueDurability(body []byte) bool {
	m := specObject(body)
	if m == nil || !specFields(m, []string{"durability"}) {
		return false
	}
	_, present := m["durability"]
	_, ok := specDurability(m)
	return present && ok
}

// specEmpty reports whether body is a valid body of a call that takes
// none: nothing, or an empty object.
func specEmpty(body []byte) bool {
	if len(bytes.Trim(body, " \t\r\n")) == 0 {
		return true
	}
	m := specObject(body)
	return m != nil && len(m) == 0
}
