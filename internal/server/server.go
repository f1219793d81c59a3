// Package server wires Spool together and owns its start and stop order:
// store → maintenance → engine → HTTP on the way up, the reverse on the way
// down.
package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/spoolq/spool/internal/config"
	"github.com/spoolq/spool/internal/dashboard"
	"github.com/spoolq/spool/internal/engine"
	"github.com/spoolq/spool/internal/httpapi"
	"github.com/spoolq/spool/internal/httpapi/auth"
	"github.com/spoolq/spool/internal/job"
	"github.com/spoolq/spool/internal/maintenance"
	"github.com/spoolq/spool/internal/metrics"
	"github.com/spoolq/spool/internal/queenapi"
	"github.com/spoolq/spool/internal/schedule"
	"github.com/spoolq/spool/internal/siteguard"
	"github.com/spoolq/spool/internal/store"
)

// idleMaintenance bounds how long the scheduler, rescuer and expirer sleep
// when they know of nothing due. The scheduler and rescuer are woken for
// everything this process does, so for them the bound only matters for
// clock jumps; the expirer is not, so it bounds how long after its
// deadline a job past its queue's maximum wait that no claim meets dies
// (on PostgreSQL, which tells the expirer no deadline, always).
const idleMaintenance = time.Second

// Server is one running Spool node.
type Server struct {
	cfg    config.Config
	logger *slog.Logger

	store store.Store
	// now is the clock of the engine and the maintenance services (see
	// opened.now); metrics measure ages by it.
	now      func() time.Time
	metrics  *metrics.Metrics
	engine   *engine.Engine
	bg       *background
	relay    engineRelay
	api      *httpapi.API
	dash     *dashboard.Dashboard
	http     *http.Server
	listener net.Listener
	served   chan error

	// fresh holds the connections that have not sent a request yet, so
	// that shutdown can close them at once instead of waiting for them.
	freshMu sync.Mutex
	fresh   map[net.Conn]struct{}

	stopOnce sync.Once
	stopErr  error

	// headerTimeout bounds the reading of a request's headers, so that a
	// client sending them slowly cannot hold a connection. Tests shorten it.
	headerTimeout time.Duration
}

// New returns a server for cfg; Start runs it.
func New(cfg config.Config, logger *slog.Logger) *Server {
	if logger == nil {
		logger = slog.Default()
	}
	return &Server{cfg: cfg, logger: logger, headerTimeout: 10 * time.Second}
}

// Start opens the store, starts the background services and the engine,
// and listens. It returns once the server accepts connections.
func (s *Server) Start(ctx context.Context) error {
	var authn *auth.Authenticator
	if s.cfg.Auth {
		var err error
		if authn, err = auth.Load(s.cfg.AuthFile, string(s.cfg.AuthTokens)); err != nil {
			return fmt.Errorf("load auth tokens: %w", err)
		}
	}
	s.metrics = metrics.New(metrics.Config{
		Queues: func(ctx context.Context) ([]job.QueueInfo, error) { return s.store.QueueList(ctx) },
		Now:    func() time.Time { return s.now() },
		Logger: s.logger,
	})
	op, err := s.openStore(ctx, &s.relay)
	if err != nil {
		return fmt.Errorf("open store: %w", err)
	}
	st, now := op.store, op.now
	s.store, s.now = st, now
	notify := func(queues []string) { s.engine.NotifyAvailable(queues) }
	fire := func(ctx context.Context, now time.Time) (time.Time, schedule.Tally, error) {
		return s.engine.FireSchedules(ctx, now)
	}
	s.bg = newBackground(st, notify, fire, now, maintenance.Retention{
		Completed:    s.cfg.RetainCompleted,
		Dead:         s.cfg.RetainDead,
		MaxCompleted: s.cfg.MaxCompleted,
		MaxDead:      s.cfg.MaxDead,
		Interval:     s.cfg.PruneInterval,
	}, op.lock, s.logger)
	s.bg.rescued = s.metrics.Rescued
	s.bg.ticks = s.metrics.ObserveTicks
	s.engine = engine.New(st, engine.Config{
		MaxPayloadBytes: s.cfg.MaxPayloadBytes,
		MaxBatch:        s.cfg.MaxBatch,
		Clock:           clockFunc(now),
		OnScheduled:     s.bg.wakeScheduler,
		OnLeased:        s.bg.wakeRescuer,
		OnSchedule:      s.bg.wakeCron,
		DecodeJob:       httpapi.DecodeJob,
		Observe:         s.metrics.Observe,
	})
	s.relay.engine.Store(s.engine)
	if err := s.bg.Start(ctx); err != nil {
		s.closeBackground()
		return fmt.Errorf("start maintenance: %w", err)
	}
	ln, err := net.Listen("tcp", s.cfg.Addr)
	if err != nil {
		s.closeBackground()
		return fmt.Errorf("listen on %s: %w", s.cfg.Addr, err)
	}
	s.listener = ln
	s.api = httpapi.New(s.engine, httpapi.Options{MaxBodyBytes: s.cfg.MaxBodyBytes, Logger: s.logger, Auth: authn,
		Metrics: s.metrics.Handler(), ObserveRequest: s.metrics.ObserveRequest, MaxEventReaders: s.cfg.MaxEventReaders})
	var handler http.Handler = s.api
	var queen *queenapi.API
	if s.cfg.QueenCompat {
		queen = queenapi.New(s.engine, queenapi.Options{MaxBodyBytes: s.cfg.MaxBodyBytes, Logger: s.logger, Auth: authn})
		handler = withQueen(s.api, httpapi.Observed(queen, s.metrics.ObserveRequest))
	}
	s.dash = dashboard.New(s.engine, dashboard.Options{Auth: authn, Sessions: st, TrustedProxies: s.cfg.TrustedProxies, Logger: s.logger})
	s.dash.Start()
	handler, err = s.guard(withDashboard(handler, s.dash), queen)
	if err != nil {
		s.dash.Stop()
		_ = ln.Close()
		s.closeBackground()
		return err
	}
	s.http = &http.Server{
		Handler:           handler,
		ReadHeaderTimeout: s.headerTimeout,
		ReadTimeout:       2 * time.Minute,
		WriteTimeout:      engine.MaxWait + 30*time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          slog.NewLogLogger(s.logger.Handler(), slog.LevelWarn),
		ConnState:         s.trackFresh,
	}
	// Event streams end when the server shuts down, so that Shutdown
	// does not wait for them.
	s.http.RegisterOnShutdown(s.engine.Events().Close)
	s.served = make(chan error, 1)
	go func() { s.served <- s.http.Serve(httpapi.CatalogListener(ln)) }()
	s.logger.Info("spool server started", "addr", ln.Addr().String(), "store", s.describeStore(), "sync", s.cfg.Sync, "auth", authn != nil, "queen_compat", s.cfg.QueenCompat)
	if authn != nil {
		s.logger.Info("auth on", "tokens", authn.Summary())
	} else if !loopback(ln.Addr()) {
		s.logger.Warn("AUTH IS OFF ON A NON-LOOPBACK ADDRESS: anyone who reaches " + ln.Addr().String() +
			" can enqueue, fetch, cancel and delete jobs; start with --auth and tokens, or listen on 127.0.0.1")
	}
	return nil
}

// guard puts h, the whole handler of the server, behind siteguard, so
// that no route escapes it: a request whose Host the server does not
// answer to, or one that a page of another site made a browser send to a
// route that changes something, is refused before any route sees it, in
// the error shape of the API whose path it named (queen is nil when
// Queen's API is off).
func (s *Server) guard(h http.Handler, queen *queenapi.API) (http.Handler, error) {
	listenHost, _, _ := net.SplitHostPort(s.cfg.Addr)
	g, err := siteguard.New(h, siteguard.Options{
		AllowedHosts: s.cfg.AllowedHosts,
		ListenHost:   listenHost,
		ChangesOnGet: func(path string) bool {
			return httpapi.ChangesOnGet(path) || (queen != nil && queenapi.Serves(path) && queenapi.ChangesOnGet(path))
		},
		Refuse: func(w http.ResponseWriter, r *http.Request, err error) {
			if queen != nil && queenapi.Serves(r.URL.Path) {
				queen.Refuse(w, r, err)
				return
			}
			s.api.Refuse(w, r, err)
		},
	})
	if err != nil {
		return nil, fmt.Errorf("allowed hosts: %w", err)
	}
	return g, nil
}

// withQueen serves Queen's routes (see queenapi.Serves) with queen and
// every other path with api.
func withQueen(api, queen http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if queenapi.Serves(r.URL.Path) {
			queen.ServeHTTP(w, r)
			return
		}
		api.ServeHTTP(w, r)
	})
}

// withDashboard serves the dashboard's paths (see dashboard.Serves: / and
// /ui/...) with dash and every other path with api, so that the dashboard
// never shadows a route of the API.
func withDashboard(api, dash http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if dashboard.Serves(r.URL.Path) {
			dash.ServeHTTP(w, r)
			return
		}
		api.ServeHTTP(w, r)
	})
}

// loopback reports whether addr is a loopback address only.
func loopback(addr net.Addr) bool {
	tcp, ok := addr.(*net.TCPAddr)
	return ok && tcp.IP.IsLoopback()
}

// Addr is the address the server listens on.
func (s *Server) Addr() string {
	if s.listener == nil {
		return ""
	}
	return s.listener.Addr().String()
}

// Engine is the server's engine, for tests and embedding.
func (s *Server) Engine() *engine.Engine { return s.engine }

// Stop shuts down gracefully: stop accepting connections, answer parked
// fetches, let in-flight requests finish (their commits included) until ctx
// ends, close the streams (which http.Server.Shutdown does not track, see
// httpapi.API.CloseStreams) likewise, stop the background services, then
// close the store. Idempotent.
func (s *Server) Stop(ctx context.Context) error {
	s.stopOnce.Do(func() { s.stopErr = s.stop(ctx) })
	return s.stopErr
}

func (s *Server) stop(ctx context.Context) error {
	var errs []error
	if s.http != nil {
		shutdown := make(chan error, 1)
		go func() { shutdown <- s.http.Shutdown(ctx) }()
		s.engine.Close() // parked fetches answer now instead of holding Shutdown
		s.closeFresh()
		if err := s.api.CloseStreams(ctx); err != nil {
			errs = append(errs, err)
		}
		if err := <-shutdown; err != nil {
			errs = append(errs, fmt.Errorf("shut down http: %w", err))
			_ = s.http.Close()
		}
		if err := <-s.served; err != nil && !errors.Is(err, http.ErrServerClosed) {
			errs = append(errs, fmt.Errorf("serve http: %w", err))
		}
		s.dash.Stop()
	}
	if err := s.closeBackground(); err != nil {
		errs = append(errs, err)
	}
	s.logger.Info("spool server stopped")
	return errors.Join(errs...)
}

// trackFresh records which connections have not sent a request yet.
func (s *Server) trackFresh(c net.Conn, state http.ConnState) {
	s.freshMu.Lock()
	defer s.freshMu.Unlock()
	if state == http.StateNew {
		if s.fresh == nil {
			s.fresh = make(map[net.Conn]struct{})
		}
		s.fresh[c] = struct{}{}
		return
	}
	delete(s.fresh, c)
}

// closeFresh closes the connections that never sent a request: http.Server
// would otherwise wait up to five seconds for each before shutting down.
func (s *Server) closeFresh() {
	s.freshMu.Lock()
	defer s.freshMu.Unlock()
	for c := range s.fresh {
		_ = c.Close()
	}
	clear(s.fresh)
}

// closeBackground stops the engine and maintenance and closes the store.
func (s *Server) closeBackground() error {
	if s.engine != nil {
		s.engine.Close()
	}
	if s.bg != nil {
		s.bg.Stop()
	}
	if s.store != nil {
		if err := s.store.Close(); err != nil {
			return fmt.Errorf("close store: %w", err)
		}
	}
	return nil
}
