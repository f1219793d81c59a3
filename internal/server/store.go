package server

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/spoolq/spool/internal/engine"
	"github.com/spoolq/spool/internal/leader"
	"github.com/spoolq/spool/internal/store"
	"github.com/spoolq/spool/internal/store/pgstore"
	"github.com/spoolq/spool/internal/store/sqlitestore"
	"github.com/spoolq/spool/internal/store/tiered"
)

// opened is a store with what the node needs to run on it.
type opened struct {
	store store.Store
	// now is the clock of the engine and the maintenance services: the
	// database's clock for a shared store, so that every node computes
	// lease expiries and run times on one clock; the wall clock otherwise.
	now func() time.Time
	// lock elects the node that runs the maintenance services of a shared
	// store; nil for a store of one node, whose node always runs them.
	lock leader.Lock
}

// openStore opens the store the config names: PostgreSQL when DB is set,
// else the embedded SQLite store in Data, with a memory tier beside it for
// jobs of memory durability. Jobs other nodes make available reach the
// engine through relay.
func (s *Server) openStore(ctx context.Context, relay *engineRelay) (*opened, error) {
	if s.cfg.DB == "" {
		disk, err := sqlitestore.Open(ctx, sqlitestore.Config{Dir: s.cfg.Data, Sync: s.cfg.Sync, Logger: s.logger,
			OnCommit: s.metrics.CommitObserver("disk")})
		if err != nil {
			return nil, err
		}
		mem, err := sqlitestore.Open(ctx, sqlitestore.Config{Dir: memoryDir(s.cfg.Data), Memory: true, TokensFrom: disk, Logger: s.logger,
			OnCommit: s.metrics.CommitObserver("memory")})
		if err != nil {
			_ = disk.Close()
			return nil, fmt.Errorf("open memory tier: %w", err)
		}
		st, err := tiered.New(ctx, disk, mem)
		if err != nil {
			_ = disk.Close()
			_ = mem.Close()
			return nil, fmt.Errorf("open memory tier: %w", err)
		}
		return &opened{store: st, now: func() time.Time { return time.Now().UTC() }}, nil
	}
	st, err := pgstore.Open(ctx, pgstore.Config{
		URL:      s.cfg.DB,
		Migrate:  true,
		Hooks:    store.Hooks{OnAvailable: relay.notify, OnConsumerGroupsDeleted: relay.forgetConsumerGroups},
		Logger:   s.logger,
		OnCommit: s.metrics.CommitObserver("postgres"),
	})
	if err != nil {
		return nil, err
	}
	return &opened{store: st, now: st.Now, lock: st.LeaderLock()}, nil
}

// memoryDir is where the memory tier of the store in data lives: on the
// memory file system /dev/shm where there is one, so that memory jobs never
// wait for a disk; in the data folder otherwise. It is emptied at every
// start either way.
func memoryDir(data string) string {
	abs, err := filepath.Abs(data)
	if err != nil {
		abs = data
	}
	sum := sha256.Sum256([]byte(abs))
	name := "spool-memory-" + hex.EncodeToString(sum[:8])
	if fi, err := os.Stat("/dev/shm"); err == nil && fi.IsDir() && writable("/dev/shm") {
		return filepath.Join("/dev/shm", name)
	}
	return filepath.Join(data, "memory")
}

// describeStore names the store for logs, without a password.
func (s *Server) describeStore() string {
	if s.cfg.DB == "" {
		return "sqlite:" + s.cfg.Data
	}
	return redactURL(s.cfg.DB)
}

// redactURL is a database URL with its password hidden, for logs.
func redactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "postgres://(unparsable URL)"
	}
	return u.Redacted()
}

// engineRelay hands wake-ups and deleted consumer groups from the store's
// listener to the engine, which is made after the store.
type engineRelay struct {
	engine atomic.Pointer[engine.Engine]
}

func (r *engineRelay) notify(queues []string) {
	if e := r.engine.Load(); e != nil {
		e.NotifyAvailable(queues)
	}
}

func (r *engineRelay) forgetConsumerGroups(lanes []string) {
	if e := r.engine.Load(); e != nil {
		e.ForgetConsumerGroups(lanes)
	}
}

// clockFunc makes a func a engine.Clock.
type clockFunc func() time.Time

func (f clockFunc) Now() time.Time { return f() }

// writable reports whether this process can create files in dir.
func writable(dir string) bool {
	f, err := os.CreateTemp(dir, ".spool-probe-*")
	if err != nil {
		return false
	}
	name := f.Name()
	f.Close()
	return os.Remove(name) == nil
}
