// Package auth decides who may call what when auth is on: the bearer
// tokens a server accepts (kept as hashes of their secrets), the role of
// each token and the permissions a role grants, and the namespaces (queue
// name prefixes) a token may be limited to. It speaks of principals,
// permissions and queue names only; the API's route table declares which
// permission each route needs and where its queues come from, and asks a
// Principal.
package auth

import "slices"

// Permission is what a route requires of the caller's token when auth is
// on. Every route of the API declares one in its route table, and a route
// registered without a valid one stops the API's start with a panic, so
// that a new route cannot be left open by mistake.
type Permission string

// The permissions, from least to most powerful. docs/protocol.md ("Auth")
// lists which route needs which; a test keeps the two in step.
const (
	// PermPublic routes answer without a token: the health checks and the
	// OpenAPI document.
	PermPublic Permission = "public"
	// PermRead routes only read: the GET routes.
	PermRead Permission = "read"
	// PermEnqueue routes add jobs.
	PermEnqueue Permission = "enqueue"
	// PermWork routes lease jobs and report on leased jobs: fetch, ack,
	// fail, extend, release and progress.
	PermWork Permission = "work"
	// PermTransact routes report on leased jobs and add jobs in one call,
	// a transaction: they need what PermWork and PermEnqueue both grant,
	// and a role has PermTransact when it has both.
	PermTransact Permission = "transact"
	// PermManage routes change jobs or queues outside the worker's cycle:
	// cancel, retry and delete jobs; pause, resume and purge queues and
	// set their durability; bulk retry and delete.
	PermManage Permission = "manage"
)

// Role is the role of a token. Each token has exactly one.
type Role string

// The roles.
const (
	// RoleAdmin may call every route.
	RoleAdmin Role = "admin"
	// RoleProducer enqueues and reads.
	RoleProducer Role = "producer"
	// RoleWorker fetches, reports on the jobs it leased, and reads.
	RoleWorker Role = "worker"
	// RoleReadOnly reads.
	RoleReadOnly Role = "read-only"
)

// Roles lists every role.
var Roles = []Role{RoleAdmin, RoleProducer, RoleWorker, RoleReadOnly}

// Permissions lists every permission.
var Permissions = []Permission{PermPublic, PermRead, PermEnqueue, PermWork, PermTransact, PermManage}

// combined are the permissions that a role has when it has each of
// their parts, rather than by the permission table.
var combined = map[Permission][]Permission{
	PermTransact: {PermWork, PermEnqueue},
}

// rolePermissions is the permission table: what each role may do besides
// the public routes, which need no token at all.
var rolePermissions = map[Role][]Permission{
	RoleAdmin:    {PermRead, PermEnqueue, PermWork, PermManage},
	RoleProducer: {PermRead, PermEnqueue},
	RoleWorker:   {PermRead, PermWork},
	RoleReadOnly: {PermRead},
}

// Allows reports whether a token of role r may call a route that requires
// p.
func (r Role) Allows(p Permission) bool {
	if parts, ok := combined[p]; ok {
		for _, part := range parts {
			if !r.Allows(part) {
				return false
			}
		}
		return true
	}
	return p == PermPublic || slices.Contains(rolePermissions[r], p)
}

// Valid reports whether r is one of Roles: a token of any other role is
// refused when it is read.
func (r Role) Valid() bool { return slices.Contains(Roles, r) }

// Valid reports whether p is one of Permissions, so that a route table can
// refuse a route whose permission was left out or misspelt.
func (p Permission) Valid() bool { return slices.Contains(Permissions, p) }
