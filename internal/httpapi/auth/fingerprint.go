package auth

import (
	"crypto/pbkdf2"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"sync"
)

// fingerprintIterations is the PBKDF2 work of a token's fingerprint: a
// fingerprint is kept in the store beside the sessions, so that guessing
// a secret from it costs that much per guess.
const fingerprintIterations = 10_000

// fingerprintCache computes a token's fingerprint once, on first use.
type fingerprintCache struct {
	once  sync.Once
	value string
}

// fingerprint of e, computed from the hash of its secret and its name.
func (e *entry) fingerprint() string {
	e.fp.once.Do(func() {
		key, err := pbkdf2.Key(sha256.New, hex.EncodeToString(e.hash[:]), []byte("spool session fingerprint:"+e.p.name), fingerprintIterations, 16)
		if err != nil {
			panic("auth: pbkdf2: " + err.Error()) // only for parameters out of range
		}
		e.fp.value = hex.EncodeToString(key)
	})
	return e.fp.value
}

// Fingerprint identifies p's token, its secret included, without
// revealing the secret: a dashboard session keeps it, so that a token
// whose secret changes ends its sessions. It is "" for a principal this
// Authenticator did not make.
func (au *Authenticator) Fingerprint(p *Principal) string {
	for i := range au.entries {
		if au.entries[i].p == p {
			return au.entries[i].fingerprint()
		}
	}
	return ""
}

// Session returns the principal of the token named name if its
// fingerprint is still fingerprint, else nil: a session of a token that
// was removed, or whose secret changed, is no longer anyone's. The
// principal is the token's as configured now, so a change of its role or
// namespaces applies to its sessions at once.
func (au *Authenticator) Session(name, fingerprint string) *Principal {
	for i := range au.entries {
		e := &au.entries[i]
		if e.p.name == name {
			if subtle.ConstantTimeCompare([]byte(e.fingerprint()), []byte(fingerprint)) == 1 {
				return e.p
			}
			return nil
		}
	}
	return nil
}
