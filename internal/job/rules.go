package job

import (
	"strings"
	"time"
	"unicode/utf8"
)

// The job rules: what an enqueue of a known id or unique key, a failed
// attempt and an expired lease lead to. They are pure functions of the job
// and the moment, called by every store, so that a store decides how to
// write a transition and never which transition to write.

// DuplicateByID decides an enqueue into queue (field names its id in the
// request, as in "jobs[3].id") whose id belongs to existing: it is a
// duplicate of existing when existing is in the same queue, and an
// *IDTakenError otherwise.
func DuplicateByID(existing *Job, queue, field string) error {
	if existing.Queue == queue {
		return nil
	}
	return &IDTakenError{Field: field}
}

// UniqueConflict reports whether a new job with unique window uniqueFor
// duplicates newest, the newest job of its queue with its unique key:
// while newest is pending when the window is zero, else when newest was
// created within the window and is not cancelled.
func UniqueConflict(newest *Job, uniqueFor time.Duration, now time.Time) bool {
	if uniqueFor == 0 {
		return newest.State.Pending()
	}
	return newest.CreatedAt.After(now.Add(-uniqueFor)) && newest.State != StateCancelled
}

// MaxErrorBytes bounds the message of one failed attempt.
const MaxErrorBytes = 64 << 10

// ErrorMessage is how a failed attempt's message is kept: cut to at most
// MaxErrorBytes without splitting a UTF-8 character, with NUL and invalid
// UTF-8 replaced by U+FFFD, so that every store keeps the same text (some
// databases cannot hold a NUL in text).
func ErrorMessage(message string) string {
	if !utf8.ValidString(message) {
		message = strings.ToValidUTF8(message, "\uFFFD")
	}
	if strings.IndexByte(message, 0) >= 0 {
		message = strings.ReplaceAll(message, "\x00", "\uFFFD")
	}
	if len(message) <= MaxErrorBytes {
		return message
	}
	cut := MaxErrorBytes
	for cut > 0 && !utf8.RuneStart(message[cut]) {
		cut--
	}
	return message[:cut]
}
