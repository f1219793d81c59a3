package sqlitestore

import (
	"math/rand/v2"
	"sort"
	"testing"
)

// The window stays the exact prefix of a model queue under random adds,
// removes, pops and refills.
func TestWindowMatchesModel(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(7, 8))
	var model []entry // every available job, sorted
	sortModel := func() {
		sort.Slice(model, func(i, k int) bool { return model[i].before(model[k]) })
	}
	w := newWindow(8, true, nil)
	seq := int64(0)
	for step := 0; step < 20000; step++ {
		switch r := rng.IntN(10); {
		case r < 4:
			seq++
			e := entry{priority: rng.IntN(3), runAt: int64(rng.IntN(4)), seq: seq}
			model = append(model, e)
			sortModel()
			w.add(e)
		case r < 6 && len(model) > 0:
			i := rng.IntN(len(model))
			w.remove(model[i])
			model = append(model[:i], model[i+1:]...)
		case r < 9:
			if w.len() == 0 && !w.complete {
				n := min(len(model), w.capacity)
				var last entry
				if n > 0 {
					last = model[n-1]
				}
				w.extend(model[:n], n == len(model), last)
			}
			if e, ok := w.peek(); ok {
				if e != model[0] {
					t.Fatalf("step %d: window front %+v, model front %+v", step, e, model[0])
				}
				w.pop()
				model = model[1:]
			}
		default:
			w.reset()
		}
		live := w.live()
		if len(live) > w.capacity || len(live) > len(model) {
			t.Fatalf("step %d: window of %d for %d jobs", step, len(live), len(model))
		}
		for i, e := range live {
			if e != model[i] {
				t.Fatalf("step %d: window[%d] = %+v, model %+v", step, i, e, model[i])
			}
		}
		if w.complete && len(live) != len(model) {
			t.Fatalf("step %d: complete window of %d for %d jobs", step, len(live), len(model))
		}
	}
}
