package auth

import (
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"strings"

	"github.com/spoolq/spool/internal/job"
)

// Authenticator checks the bearer tokens of requests. It keeps SHA-256
// hashes of the secrets, never the secrets, and compares a presented
// secret's hash with every known hash in constant time. It is safe for
// concurrent use.
type Authenticator struct {
	entries []entry
}

// entry is one accepted token: the hash of its secret and whom it stands
// for.
type entry struct {
	hash [sha256.Size]byte
	p    *Principal
	fp   *fingerprintCache
}

// New returns an Authenticator accepting tokens. It fails when tokens is
// empty, when a token is malformed, or when two tokens share a name or a
// secret; its errors name tokens, never secrets.
func New(tokens []Token) (*Authenticator, error) {
	if len(tokens) == 0 {
		return nil, errors.New("no tokens")
	}
	au := &Authenticator{}
	names := make(map[string]bool, len(tokens))
	hashes := make(map[[sha256.Size]byte]string, len(tokens))
	for _, t := range tokens {
		if !job.ValidName(t.Name) {
			return nil, fmt.Errorf("token name %q is not a name", t.Name)
		}
		if names[t.Name] {
			return nil, fmt.Errorf("token %s is listed twice", t.Name)
		}
		names[t.Name] = true
		if !t.Role.Valid() {
			return nil, fmt.Errorf("token %s: role %q is not admin, producer, worker or read-only", t.Name, t.Role)
		}
		if err := checkSecret(t.Secret); err != nil {
			return nil, fmt.Errorf("token %s: %w", t.Name, err)
		}
		sum := sha256.Sum256([]byte(t.Secret))
		if other, dup := hashes[sum]; dup {
			return nil, fmt.Errorf("tokens %s and %s have the same secret", other, t.Name)
		}
		hashes[sum] = t.Name
		for _, ns := range t.Namespaces {
			if !job.ValidName(ns) {
				return nil, fmt.Errorf("token %s: namespace %q is not a queue name prefix", t.Name, ns)
			}
		}
		p := &Principal{name: t.Name, role: t.Role, namespaces: append([]string(nil), t.Namespaces...)}
		au.entries = append(au.entries, entry{hash: sum, p: p, fp: &fingerprintCache{}})
	}
	return au, nil
}

// Load is New of LoadTokens(path, env): the tokens of the file at path and
// of env, the value of SPOOL_AUTH_TOKENS.
func Load(path, env string) (*Authenticator, error) {
	tokens, err := LoadTokens(path, env)
	if err != nil {
		return nil, err
	}
	return New(tokens)
}

// Summary describes the tokens for a start-up log line: names, roles and
// namespaces, no secrets.
func (au *Authenticator) Summary() []string {
	out := make([]string, len(au.entries))
	for i, e := range au.entries {
		ns := "*"
		if len(e.p.namespaces) > 0 {
			ns = strings.Join(e.p.namespaces, ",")
		}
		out[i] = e.p.name + " " + string(e.p.role) + " " + ns
	}
	return out
}

// Authenticate returns the principal of an Authorization header, or an
// *UnauthorizedError when the header holds no bearer token or an unknown
// one. Every known hash is compared, so the time taken does not tell which
// token came close.
func (au *Authenticator) Authenticate(header string) (*Principal, error) {
	const scheme = "bearer "
	if len(header) <= len(scheme) || !strings.EqualFold(header[:len(scheme)], scheme) {
		return nil, &UnauthorizedError{Message: "this call needs an Authorization: Bearer token"}
	}
	sum := sha256.Sum256([]byte(strings.TrimSpace(header[len(scheme):])))
	var found *Principal
	for i := range au.entries {
		if subtle.ConstantTimeCompare(sum[:], au.entries[i].hash[:]) == 1 {
			found = au.entries[i].p
		}
	}
	if found == nil {
		return nil, &UnauthorizedError{Message: "the bearer token is not valid"}
	}
	return found, nil
}
