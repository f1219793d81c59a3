package server

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/spoolq/spool/internal/leader"
	"github.com/spoolq/spool/internal/maintenance"
	"github.com/spoolq/spool/internal/schedule"
	"github.com/spoolq/spool/internal/store"
)

// background runs the maintenance services (scheduler, rescuer, expirer,
// pruner, cron):
// from Start to Stop on a node that owns its store, and only while the node
// leads on a store that several nodes share, so that they run on one node
// at a time. Each term of leadership gets fresh services.
type background struct {
	st     store.Maintainer
	notify func(queues []string)
	// rescued is told how many jobs of each queue the rescuer took back
	// (metrics); nil for none.
	rescued   func(byQueue map[string]int)
	now       func() time.Time
	retention maintenance.Retention
	// fire fires the schedules due at now; see engine.Engine.FireSchedules.
	fire maintenance.CronFire
	// ticks is told the tally of every pass of cron (metrics); nil for
	// none.
	ticks   func(schedule.Tally)
	logger  *slog.Logger
	elector *leader.Elector // nil on a store of one node

	mu        sync.Mutex
	scheduler *maintenance.Scheduler // nil while not running
	rescuer   *maintenance.Rescuer
	expirer   *maintenance.Expirer
	pruner    *maintenance.Pruner
	cron      *maintenance.Cron
}

func newBackground(st store.Maintainer, notify func([]string), fire maintenance.CronFire,
	now func() time.Time, r maintenance.Retention, lock leader.Lock, logger *slog.Logger) *background {
	b := &background{st: st, notify: notify, fire: fire, now: now, retention: r, logger: logger}
	if lock != nil {
		b.elector = leader.New(leader.Config{Lock: lock, OnElected: b.startServices, OnDemoted: b.stopServices, Logger: logger})
	}
	return b
}

// Start runs the services, or campaigns for the leadership that runs them.
func (b *background) Start(ctx context.Context) error {
	if b.elector != nil {
		return b.elector.Start(ctx)
	}
	b.startServices(ctx)
	return nil
}

// Stop stops the services and, on a shared store, gives leadership up so
// that another node takes over at once. Idempotent.
func (b *background) Stop() {
	if b.elector != nil {
		b.elector.Stop()
	}
	b.stopServices()
}

func (b *background) startServices(ctx context.Context) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.scheduler != nil {
		return
	}
	b.scheduler = maintenance.NewScheduler(b.st, b.notify, b.now, idleMaintenance, b.logger)
	b.rescuer = maintenance.NewRescuer(b.st, b.notify, b.rescued, b.now, idleMaintenance, b.logger)
	b.expirer = maintenance.NewExpirer(b.st, b.notify, b.now, idleMaintenance, b.logger)
	b.pruner = maintenance.NewPruner(b.st, b.retention, b.now, b.logger)
	b.cron = maintenance.NewCron(b.fire, b.ticks, b.now, idleMaintenance, b.logger)
	for _, svc := range []interface{ Start(context.Context) error }{b.scheduler, b.rescuer, b.expirer, b.pruner, b.cron} {
		_ = svc.Start(ctx) // the loops start in the background and do not fail
	}
}

func (b *background) stopServices() {
	b.mu.Lock()
	scheduler, rescuer, expirer, pruner, cron := b.scheduler, b.rescuer, b.expirer, b.pruner, b.cron
	b.scheduler, b.rescuer, b.expirer, b.pruner, b.cron = nil, nil, nil, nil, nil
	b.mu.Unlock()
	if scheduler != nil {
		cron.Stop()
		pruner.Stop()
		expirer.Stop()
		rescuer.Stop()
		scheduler.Stop()
	}
}

// wakeScheduler asks the running scheduler for a pass by at. A node that
// does not lead ignores it: the leader's scheduler looks at least every
// idleMaintenance.
func (b *background) wakeScheduler(at time.Time) {
	b.mu.Lock()
	s := b.scheduler
	b.mu.Unlock()
	if s != nil {
		s.Wake(at)
	}
}

// wakeRescuer asks the running rescuer for a pass by at; see
// wakeScheduler.
func (b *background) wakeRescuer(at time.Time) {
	b.mu.Lock()
	r := b.rescuer
	b.mu.Unlock()
	if r != nil {
		r.Wake(at)
	}
}

// wakeCron asks the running cron service for a pass by at; see
// wakeScheduler.
func (b *background) wakeCron(at time.Time) {
	b.mu.Lock()
	c := b.cron
	b.mu.Unlock()
	if c != nil {
		c.Wake(at)
	}
}

// leading reports whether this node runs the services now.
func (b *background) leading() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.scheduler != nil
}
