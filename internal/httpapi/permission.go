package httpapi

import "slices"

// Permission is what a route requires of the caller's token when auth is
// on. Every route declares one when it is registered (see register); a
// route registered without one stops New with a panic, so a new route
// cannot be left open by mistake.
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
var Permissions = []Permission{PermPublic, PermRead, PermEnqueue, PermWork, PermManage}

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
	return p == PermPublic || slices.Contains(rolePermissions[r], p)
}

// valid reports whether r is a known role.
func (r Role) valid() bool { return slices.Contains(Roles, r) }

// valid reports whether p is a known permission.
func (p Permission) valid() bool { return slices.Contains(Permissions, p) }
