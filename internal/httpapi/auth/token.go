package auth

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/spoolq/spool/internal/job"
)

// MinTokenLength is the shortest secret a token may have: a short secret
// can be guessed.
const MinTokenLength = 16

// maxTokenLength bounds a secret, which travels in every request header.
const maxTokenLength = 512

// Token is one credential a server accepts when auth is on. Its secret is
// kept only until New hashes it; error messages name tokens by Name,
// never by secret.
type Token struct {
	// Name identifies the token in logs and errors.
	Name string
	// Role is what the token may do.
	Role Role
	// Namespaces are the queue name prefixes the token is limited to; nil
	// means every queue.
	Namespaces []string
	// Secret is what callers send as "Authorization: Bearer <secret>".
	Secret string
}

// ParseTokens reads tokens in the format of docs/protocol.md ("Auth"):
// one token per line as "name role namespaces secret", separated by
// blanks, where namespaces is "*" for every queue or a comma-separated
// list of queue name prefixes. Blank lines and lines starting with "#" are
// skipped; ";" separates entries like a new line, so that a list fits in
// one environment variable. source names the input in errors.
func ParseTokens(text, source string) ([]Token, error) {
	var tokens []Token
	var errs []error
	lineNo := 0
	for _, line := range strings.Split(text, "\n") {
		lineNo++
		for _, entry := range strings.Split(line, ";") {
			entry = strings.TrimSpace(entry)
			if entry == "" || strings.HasPrefix(entry, "#") {
				continue
			}
			t, err := parseToken(entry)
			if err != nil {
				errs = append(errs, fmt.Errorf("%s line %d: %w", source, lineNo, err))
				continue
			}
			tokens = append(tokens, t)
		}
	}
	return tokens, errors.Join(errs...)
}

// parseToken reads one entry. Its errors never quote the entry, which
// holds a secret.
func parseToken(entry string) (Token, error) {
	f := strings.Fields(entry)
	if len(f) != 4 {
		return Token{}, fmt.Errorf("want 4 fields (name role namespaces secret), got %d", len(f))
	}
	t := Token{Name: f[0], Role: Role(f[1]), Secret: f[3]}
	if !job.ValidName(t.Name) {
		return Token{}, fmt.Errorf("token name must be 1-%d characters of A-Za-z0-9_.:- starting with a letter or digit", job.MaxNameLength)
	}
	if !t.Role.Valid() {
		return Token{}, fmt.Errorf("token %s: role %q is not admin, producer, worker or read-only", t.Name, f[1])
	}
	if f[2] != "*" {
		for _, ns := range strings.Split(f[2], ",") {
			if !job.ValidName(ns) {
				return Token{}, fmt.Errorf("token %s: namespace %q is not a queue name prefix (A-Za-z0-9_.:-, starting with a letter or digit)", t.Name, ns)
			}
			t.Namespaces = append(t.Namespaces, ns)
		}
	}
	if err := checkSecret(t.Secret); err != nil {
		return Token{}, fmt.Errorf("token %s: %w", t.Name, err)
	}
	return t, nil
}

// checkSecret requires the RFC 6750 token syntax and a length that resists
// guessing.
func checkSecret(s string) error {
	if len(s) < MinTokenLength || len(s) > maxTokenLength {
		return fmt.Errorf("secret must be %d to %d characters", MinTokenLength, maxTokenLength)
	}
	body := strings.TrimRight(s, "=")
	for i := 0; i < len(body); i++ {
		c := body[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case c == '-', c == '.', c == '_', c == '~', c == '+', c == '/':
		default:
			return errors.New("secret may hold only A-Za-z0-9-._~+/ and trailing =")
		}
	}
	return nil
}

// LoadTokens reads the tokens of the file at path (when path is not empty)
// and of env, the value of SPOOL_AUTH_TOKENS, in the format of
// ParseTokens. It fails when neither holds a token.
func LoadTokens(path, env string) ([]Token, error) {
	var tokens []Token
	var errs []error
	if path != "" {
		data, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("read auth file: %w", err)
		}
		t, err := ParseTokens(string(data), path)
		tokens, errs = append(tokens, t...), append(errs, err)
	}
	if env != "" {
		t, err := ParseTokens(env, "SPOOL_AUTH_TOKENS")
		tokens, errs = append(tokens, t...), append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	if len(tokens) == 0 {
		return nil, errors.New("auth is on but no token was given: list tokens in --auth-file or SPOOL_AUTH_TOKENS")
	}
	return tokens, nil
}
