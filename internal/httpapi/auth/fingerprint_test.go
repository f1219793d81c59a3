package auth

import (
	"strings"
	"testing"
)

// A token's fingerprint finds its principal again while the token is
// configured with the same secret; a removed token, or one whose secret
// changed, finds none, and a new role applies at once.
func TestSessionFingerprint(t *testing.T) {
	t.Parallel()
	const secret, other = "secret-0123456789abcdef", "secret-fedcba9876543210"
	au, err := New([]Token{{Name: "ops", Role: RoleAdmin, Secret: secret}, {Name: "dash", Role: RoleReadOnly, Secret: other}})
	if err != nil {
		t.Fatal(err)
	}
	p, err := au.Authenticate("Bearer " + secret)
	if err != nil {
		t.Fatal(err)
	}
	fp := au.Fingerprint(p)
	if fp == "" || strings.Contains(fp, secret) || fp == au.Fingerprint(mustAuth(t, au, other)) {
		t.Fatalf("fingerprint %q: want one of its own that does not hold the secret", fp)
	}
	if got := au.Session("ops", fp); got != p {
		t.Errorf("Session(ops, its fingerprint) = %v, want its principal", got)
	}
	if got := au.Session("dash", fp); got != nil {
		t.Errorf("Session with another token's name = %v, want nil", got)
	}

	for name, tokens := range map[string][]Token{
		"removed":        {{Name: "dash", Role: RoleReadOnly, Secret: other}},
		"secret changed": {{Name: "ops", Role: RoleAdmin, Secret: "secret-0123456789abcdeX"}},
	} {
		again, err := New(tokens)
		if err != nil {
			t.Fatal(err)
		}
		if got := again.Session("ops", fp); got != nil {
			t.Errorf("%s: Session = %v, want nil", name, got)
		}
	}
	demoted, err := New([]Token{{Name: "ops", Role: RoleReadOnly, Secret: secret}})
	if err != nil {
		t.Fatal(err)
	}
	if got := demoted.Session("ops", fp); got == nil || got.Role() != RoleReadOnly {
		t.Errorf("role changed: Session = %v, want the token with its new role", got)
	}
}

func mustAuth(t *testing.T, au *Authenticator, secret string) *Principal {
	t.Helper()
	p, err := au.Authenticate("Bearer " + secret)
	if err != nil {
		t.Fatal(err)
	}
	return p
}
