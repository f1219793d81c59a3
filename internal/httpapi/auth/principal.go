package auth

import (
	"fmt"
	"slices"
	"strings"
)

// Principal is the caller a valid token stands for: its name, its role and
// the namespaces it is limited to. Principals are made by an Authenticator
// and never change.
type Principal struct {
	name       string
	role       Role
	namespaces []string
}

// Name is the token's name, for logs.
func (p *Principal) Name() string { return p.name }

// Role is the token's role.
func (p *Principal) Role() Role { return p.role }

// Limited reports whether the token is limited to namespaces. Only then
// need the queues a call names be checked, so that the checks cost nothing
// for the other tokens.
func (p *Principal) Limited() bool { return len(p.namespaces) > 0 }

// Namespaces are the queue name prefixes the token is limited to (a
// copy); nil when it is not limited.
func (p *Principal) Namespaces() []string { return slices.Clone(p.namespaces) }

// AllowsQueue reports whether the principal may touch the queue name: the
// name starts with one of its namespaces, or it has none.
func (p *Principal) AllowsQueue(name string) bool {
	if len(p.namespaces) == 0 {
		return true
	}
	for _, ns := range p.namespaces {
		if strings.HasPrefix(name, ns) {
			return true
		}
	}
	return false
}

// CheckPermission returns a *ForbiddenError unless the principal's role
// allows perm. method and path name the call in the error; the answer
// depends on the role alone, so it tells nothing about jobs or queues.
func (p *Principal) CheckPermission(perm Permission, method, path string) error {
	if p.role.Allows(perm) {
		return nil
	}
	return &ForbiddenError{Message: fmt.Sprintf("a %s token may not call %s %s", p.role, method, path)}
}

// CheckQueue returns a *ForbiddenError naming field (the wire name of the
// value that named the queue, "" for a path) unless the principal may
// touch the queue name. The answer depends only on the name and the token,
// never on what the server holds.
func (p *Principal) CheckQueue(name, field string) error {
	if p.AllowsQueue(name) {
		return nil
	}
	prefix := ""
	if field != "" {
		prefix = field + ": "
	}
	return &ForbiddenError{Field: field, Message: fmt.Sprintf("%sthis token may not use queue %q", prefix, name)}
}

// UnauthorizedError is the refusal of a request without valid credentials:
// no Authorization header, another scheme, or an unknown secret. The API
// answers it 401 unauthorized.
type UnauthorizedError struct {
	// Message says what was wrong, without quoting the header.
	Message string
}

// Error implements error.
func (e *UnauthorizedError) Error() string { return e.Message }

// ForbiddenError is the refusal of a valid token whose role lacks a call's
// permission, or which names a queue outside its namespaces. The API
// answers it 403 forbidden.
type ForbiddenError struct {
	// Field is the wire name of the value at fault, "" when none is.
	Field string
	// Message says what the token may not do.
	Message string
}

// Error implements error.
func (e *ForbiddenError) Error() string { return e.Message }
