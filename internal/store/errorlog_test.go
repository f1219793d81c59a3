package store

import (
	"reflect"
	"testing"
	"time"

	"github.com/spoolq/spool/internal/job"
)

func TestErrorsRoundTrip(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	errs := []job.AttemptError{{Attempt: 1, Message: "first", At: at}, {Attempt: 9, Message: "latest", At: at.Add(time.Second)}}
	for _, dropped := range []int{0, 7} {
		b, err := EncodeErrors(errs, dropped)
		if err != nil {
			t.Fatal(err)
		}
		got, gotDropped, err := DecodeErrors(b)
		if err != nil || !reflect.DeepEqual(got, errs) || gotDropped != dropped {
			t.Fatalf("round trip of %d dropped through %s: %+v, %d, %v", dropped, b, got, gotDropped, err)
		}
	}
	// A history written before the bounds, a plain array, reads as such.
	got, dropped, err := DecodeErrors([]byte(`[{"attempt":1,"message":"x","at":"2026-11-24T12:00:00Z"}]`))
	if err != nil || len(got) != 1 || got[0].Message != "x" || !got[0].At.Equal(at) || dropped != 0 {
		t.Fatalf("plain array: %+v, %d, %v", got, dropped, err)
	}
	if b, err := EncodeErrors(nil, 0); b != nil || err != nil {
		t.Fatalf("empty history: %q, %v", b, err)
	}
}

func TestAppendStoredError(t *testing.T) {
	t.Parallel()
	var stored []byte
	for i := 1; i <= job.LatestErrors+5; i++ {
		var err error
		if stored, err = AppendStoredError(stored, job.AttemptError{Attempt: i, Message: "m"}); err != nil {
			t.Fatal(err)
		}
	}
	errs, dropped, err := DecodeErrors(stored)
	if err != nil || len(errs) != job.LatestErrors+1 || dropped != 4 || errs[0].Attempt != 1 || errs[1].Attempt != 6 {
		t.Fatalf("after %d errors: %d kept, %d dropped, %v", job.LatestErrors+5, len(errs), dropped, err)
	}
}
