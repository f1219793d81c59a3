package queenapi

import (
	"context"
	"errors"
	"fmt"
	"net/url"

	"github.com/spoolq/spool/internal/engine"
	"github.com/spoolq/spool/internal/httpapi/auth"
	"github.com/spoolq/spool/internal/job"
)

// What Queen's calls may configure, and with which permission.
//
// A call that configures something needs the permission of the native
// route that configures the same thing, and without it is refused with
// that route's 403, before anything is written:
//   - a push or a transaction that creates a queue configures it (Queen's
//     defaults: ordered, with queenSettings): the permission of PUT
//     /v1/queues/{queue}/limits. A queue that exists is never configured
//     by them: it keeps its own limits and settings;
//   - a pop or a seek that creates a consumer group: the permission of PUT
//     /v1/queues/{queue}/consumer-groups/{group}. When the group's queue
//     does not exist yet, it is created as a push creates it.
// A pop never changes the configuration of a queue that exists.

// queenLimits are the limits of a queue that Queen's API creates: each
// partition's messages one at a time, in order, as Queen hands them out.
var queenLimits = job.Limits{Ordered: true}

// queenSettings are the settings of a queue that Queen's API creates:
// Queen's lease of five minutes and three retries.
var queenSettings = job.QueueSettings{DefaultLease: queenLease, DefaultMaxAttempts: queenRetryLimit + 1}

// mayConfigure refuses, as the native route method path refuses it, a
// caller whose token may not call that route, which what (a sentence
// that ends the refusal's message) needs. field names the value of the
// request that asked for it.
func mayConfigure(p *auth.Principal, method, path, field, what string) error {
	if p == nil {
		return nil
	}
	err := p.CheckPermission(auth.PermManage, method, path)
	var refused *auth.ForbiddenError
	if !errors.As(err, &refused) {
		return err
	}
	msg := fmt.Sprintf("%s, which %s", refused.Message, what)
	if field != "" {
		msg = field + ": " + msg
	}
	return &auth.ForbiddenError{Field: field, Message: msg}
}

// queuePath is the path of a native route under queue name.
func queuePath(name, rest string) string {
	return "/v1/queues/" + url.PathEscape(name) + rest
}

// newQueues configures the queues a push or a transaction creates, for
// caller p: Queen's defaults, when p may configure queues. fieldOf names
// the first item of each queue, for the refusal.
func newQueues(p *auth.Principal, fieldOf func(queue string) string) engine.NewQueues {
	return func(name string) (job.Limits, job.QueueSettings, error) {
		what := fmt.Sprintf("a push that creates queue %s needs: it creates the queue ordered, with Queen's settings; "+
			"configure the queue first (POST /api/v1/configure) with a token that may", name)
		if err := mayConfigure(p, "PUT", queuePath(name, "/limits"), fieldOf(name), what); err != nil {
			return job.Limits{}, job.QueueSettings{}, err
		}
		return queenLimits, queenSettings, nil
	}
}

// createGroup creates the consumer group req names, where req starts it,
// for caller p, which call (a pop, a seek) made need it; field names the
// group in the request, for a refusal. A group's queue that does not
// exist yet is created first, as a push creates it.
func (a *API) createGroup(ctx context.Context, p *auth.Principal, req engine.ConsumerGroupRequest, field, call string) error {
	what := fmt.Sprintf("%s needs to create consumer group %s of queue %s, which does not exist; "+
		"create the group first with a token that may", call, req.Name, req.Queue)
	if err := mayConfigure(p, "PUT", queuePath(req.Queue, "/consumer-groups/"+url.PathEscape(req.Name)), field, what); err != nil {
		return err
	}
	if err := a.engine.CreateQueue(ctx, req.Queue, queenLimits, queenSettings); err != nil {
		return err
	}
	_, _, err := a.engine.CreateConsumerGroup(ctx, req)
	return err
}
