package auth

import (
	"fmt"
	"os"
	"strings"
	"testing"
)

func TestParseTokens(t *testing.T) {
	t.Parallel()
	text := `# name  role  namespaces  secret
ops       admin      *                 aaaaaaaaaaaaaaaaaaaaaaaa
billing   producer   billing.,emails   bbbbbbbbbbbbbbbbbbbbbbbb ; w1 worker billing. cccccccccccccccccccc==

dash      read-only  *                 dddddddddddddddd/+~._-dd
`
	tokens, err := ParseTokens(text, "test")
	if err != nil {
		t.Fatal(err)
	}
	want := []Token{
		{Name: "ops", Role: RoleAdmin, Secret: "aaaaaaaaaaaaaaaaaaaaaaaa"},
		{Name: "billing", Role: RoleProducer, Namespaces: []string{"billing.", "emails"}, Secret: "bbbbbbbbbbbbbbbbbbbbbbbb"},
		{Name: "w1", Role: RoleWorker, Namespaces: []string{"billing."}, Secret: "cccccccccccccccccccc=="},
		{Name: "dash", Role: RoleReadOnly, Secret: "dddddddddddddddd/+~._-dd"},
	}
	if fmt.Sprint(tokens) != fmt.Sprint(want) {
		t.Fatalf("got %+v\nwant %+v", tokens, want)
	}
	const secret = "zzzzzzzzzzzzzzzzzzzzzzzzzzz"
	for _, bad := range []string{
		"ops admin * short",
		"ops boss * " + secret,
		"ops admin .bad " + secret,
		"ops admin * " + secret + " extra",
		"bad/name admin * " + secret,
		"ops admin * " + secret + "\"",
		"ops admin " + secret,
	} {
		_, err := ParseTokens(bad, "test")
		if err == nil {
			t.Errorf("%q: no error", bad)
			continue
		}
		if strings.Contains(err.Error(), secret) || strings.Contains(err.Error(), "short") {
			t.Errorf("%q: the error quotes the secret: %v", bad, err)
		}
	}
	for _, dup := range [][]Token{
		{{Name: "a", Role: RoleAdmin, Secret: secret}, {Name: "a", Role: RoleWorker, Secret: secret + "2"}},
		{{Name: "a", Role: RoleAdmin, Secret: secret}, {Name: "b", Role: RoleWorker, Secret: secret}},
		nil,
	} {
		if _, err := New(dup); err == nil {
			t.Errorf("New(%d tokens with a clash) did not fail", len(dup))
		} else if strings.Contains(err.Error(), secret) {
			t.Errorf("the error quotes the secret: %v", err)
		}
	}
}

func TestLoadTokens(t *testing.T) {
	t.Parallel()
	path := t.TempDir() + "/tokens"
	if err := os.WriteFile(path, []byte("ops admin * aaaaaaaaaaaaaaaaaaaaaaaa\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tokens, err := LoadTokens(path, "w worker q. bbbbbbbbbbbbbbbbbbbbbbbb")
	if err != nil || len(tokens) != 2 {
		t.Fatalf("LoadTokens: %d tokens, %v", len(tokens), err)
	}
	if _, err := LoadTokens("", " # only a comment "); err == nil {
		t.Error("no tokens at all: no error")
	}
	if _, err := LoadTokens(path+".missing", ""); err == nil {
		t.Error("missing file: no error")
	}
}

// A limited principal may touch the queues under its prefixes only, and
// says so naming the field at fault; one without namespaces touches all.
func TestPrincipalQueues(t *testing.T) {
	t.Parallel()
	au, err := New([]Token{
		{Name: "all", Role: RoleWorker, Secret: "all-secret-0123456789"},
		{Name: "billing", Role: RoleWorker, Namespaces: []string{"billing.", "emails"}, Secret: "billing-secret-0123456789"},
	})
	if err != nil {
		t.Fatal(err)
	}
	all, err := au.Authenticate("Bearer all-secret-0123456789")
	if err != nil || all.Limited() || !all.AllowsQueue("anything") {
		t.Fatalf("unlimited token: %+v, %v", all, err)
	}
	p, err := au.Authenticate("bEaReR   billing-secret-0123456789 ")
	if err != nil || !p.Limited() || p.Name() != "billing" || p.Role() != RoleWorker {
		t.Fatalf("limited token: %+v, %v", p, err)
	}
	for name, want := range map[string]bool{"billing.x": true, "emails-eu": true, "billing": false, "other": false} {
		if got := p.AllowsQueue(name); got != want {
			t.Errorf("AllowsQueue(%q) = %v, want %v", name, got, want)
		}
	}
	err = p.CheckQueue("other", "jobs[2].queue")
	if f, ok := err.(*ForbiddenError); !ok || f.Field != "jobs[2].queue" || f.Message != `jobs[2].queue: this token may not use queue "other"` {
		t.Errorf("CheckQueue: %#v", err)
	}
	if err := p.CheckPermission(PermManage, "POST", "/v1/queues/q/purge"); err == nil || err.Error() != "a worker token may not call POST /v1/queues/q/purge" {
		t.Errorf("CheckPermission: %v", err)
	}
	for _, header := range []string{"", "Bearer", "Bearer ", "Basic billing-secret-0123456789", "Bearer billing-secret-012345678"} {
		if _, err := au.Authenticate(header); err == nil {
			t.Errorf("Authenticate(%q): no error", header)
		} else if _, ok := err.(*UnauthorizedError); !ok {
			t.Errorf("Authenticate(%q): %T, want *UnauthorizedError", header, err)
		}
	}
}
