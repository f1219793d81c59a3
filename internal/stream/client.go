package stream

import (
	"context"
	"errors"
	"sync"
)

// Client is a stream connection that is dialled on first use and dialled
// again after it breaks, for callers that want the stream as they want an
// http.Client: always there. It is safe for concurrent use; every call
// shares the one connection.
type Client struct {
	cfg Config

	mu      sync.Mutex
	conn    *Conn    // the current connection, nil before the first dial
	dialing *attempt // the dial in progress, if any
	gen     int      // counts CloseIdle calls, to retire what dials return after one
}

// attempt is one dial, shared by every call that waits for it.
type attempt struct {
	done chan struct{}
	conn *Conn
	err  error
}

// NewClient returns a Client for cfg. It does not connect yet.
func NewClient(cfg Config) *Client { return &Client{cfg: cfg} }

// Do sends one request on the current connection, dialling one first when
// there is none or it broke, and returns its answer; see Conn.Do. A
// request that never reached a connection that broke is sent once more on
// a new one. Errors of the dial are returned as they are: an
// *UpgradeError for a refused upgrade.
func (c *Client) Do(ctx context.Context, method, target string, body []byte) (Answer, error) {
	for try := 0; ; try++ {
		conn, err := c.get(ctx)
		if err != nil {
			return Answer{}, err
		}
		a, err := conn.Do(ctx, method, target, body)
		if err != nil && try == 0 && errors.Is(err, errNotSent) {
			continue
		}
		return a, err
	}
}

// get returns a working connection, dialling one if needed. The dial does
// not end with ctx, which may end only the wait for it: other calls may be
// waiting for the same dial.
func (c *Client) get(ctx context.Context) (*Conn, error) {
	c.mu.Lock()
	if c.conn != nil && c.conn.Err() == nil {
		conn := c.conn
		c.mu.Unlock()
		return conn, nil
	}
	d := c.dialing
	if d == nil {
		d = &attempt{done: make(chan struct{})}
		c.dialing = d
		go c.dial(d, c.gen)
	}
	c.mu.Unlock()
	select {
	case <-d.done:
		return d.conn, d.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// dial runs the attempt d and installs its connection. A connection that
// arrives after CloseIdle is handed to the calls that waited for it and
// retired, so that it closes once they are answered.
func (c *Client) dial(d *attempt, gen int) {
	conn, err := Dial(context.Background(), c.cfg)
	c.mu.Lock()
	c.dialing = nil
	if err == nil {
		if gen == c.gen {
			c.conn = conn
		} else {
			defer conn.Retire()
		}
	}
	d.conn, d.err = conn, err
	close(d.done)
	c.mu.Unlock()
}

// CloseIdle retires the current connection: it closes once the calls in
// flight on it are answered. Later calls dial a new one.
func (c *Client) CloseIdle() {
	if conn := c.detach(); conn != nil {
		conn.Retire()
	}
}

// Close closes the current connection at once; its calls in flight fail
// with ErrClosed. Later calls dial a new one.
func (c *Client) Close() {
	if conn := c.detach(); conn != nil {
		conn.Close()
	}
}

// detach takes the current connection out of use, so that later calls
// dial a new one, and returns it (nil when there was none).
func (c *Client) detach() *Conn {
	c.mu.Lock()
	defer c.mu.Unlock()
	conn := c.conn
	c.conn = nil
	c.gen++
	return conn
}
