package auth

import "testing"

// A transaction needs the rights of work and of enqueue: only a role that
// has both may call it.
func TestTransactNeedsWorkAndEnqueue(t *testing.T) {
	t.Parallel()
	for _, r := range Roles {
		want := r.Allows(PermWork) && r.Allows(PermEnqueue)
		if got := r.Allows(PermTransact); got != want {
			t.Errorf("%s allows transact: %v, want %v", r, got, want)
		}
	}
	if !RoleAdmin.Allows(PermTransact) || RoleWorker.Allows(PermTransact) || RoleProducer.Allows(PermTransact) {
		t.Error("transact must be the admin's, and neither the worker's nor the producer's alone")
	}
	if !PermTransact.Valid() {
		t.Error("transact is not a valid permission")
	}
}
