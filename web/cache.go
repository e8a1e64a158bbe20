package web

import (
	"context"
	"errors"
	"sync"
	"time"
)

// Bounds of the cache.
const (
	maxEntries = 2000 // reads kept (listings and executions); past it, the stale ones go
	maxFinal   = 1000 // executions that can no longer change, kept for good
)

// ErrSlowStore is returned when the store did not answer in time.
var ErrSlowStore = errors.New("the store did not answer in time")

// cache shares reads of the store. A read is reused for the refresh
// interval, however many pages and clients ask, and one read of a key is in
// flight at a time. A read that can no longer change (an execution that
// settled for good) is kept until evicted. Each read runs in a goroutine
// the cache owns, bounded by the store timeout; a request waits for it no
// longer than its own deadline, so a slow store makes the page say so
// instead of hanging.
type cache struct {
	base    context.Context
	refresh time.Duration
	timeout time.Duration
	now     func() time.Time

	mu      sync.Mutex
	entries map[string]*flight
	final   int
	wg      sync.WaitGroup

	loads int // reads started, for tests
}

type flight struct {
	done  chan struct{}
	val   any
	err   error
	at    time.Time // when the read started
	final bool
}

// loadFunc reads one thing; final says it can no longer change.
type loadFunc func(ctx context.Context) (val any, final bool, err error)

func newCache(base context.Context, refresh, timeout time.Duration, now func() time.Time) *cache {
	return &cache{base: base, refresh: refresh, timeout: timeout, now: now, entries: map[string]*flight{}}
}

// get returns the value of key, read by load at most once per refresh
// interval, and when it was read.
func (c *cache) get(ctx context.Context, key string, load loadFunc) (any, time.Time, error) {
	c.mu.Lock()
	f := c.entries[key]
	if f == nil || !c.fresh(f) {
		f = c.start(key, load)
	}
	c.mu.Unlock()
	wait, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	select {
	case <-f.done:
		return f.val, f.at, f.err
	case <-wait.Done():
		if ctx.Err() != nil {
			return nil, time.Time{}, ctx.Err()
		}
		return nil, time.Time{}, ErrSlowStore
	}
}

// fresh reports whether f may be reused. Called with c.mu held.
func (c *cache) fresh(f *flight) bool {
	select {
	case <-f.done:
	default:
		return true // in flight: share it
	}
	if f.final && f.err == nil {
		return true
	}
	return c.now().Sub(f.at) < c.refresh
}

// start begins a read of key. Called with c.mu held.
func (c *cache) start(key string, load loadFunc) *flight {
	if len(c.entries) >= maxEntries {
		c.evict()
	}
	if old := c.entries[key]; old != nil && old.final {
		c.final--
	}
	f := &flight{done: make(chan struct{}), at: c.now()}
	c.entries[key] = f
	c.loads++
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		ctx, cancel := context.WithTimeout(c.base, c.timeout)
		defer cancel()
		val, final, err := load(ctx)
		if errors.Is(err, context.DeadlineExceeded) {
			err = ErrSlowStore
		}
		c.mu.Lock()
		f.val, f.final, f.err = val, final && err == nil, err
		if f.final {
			c.final++
			if c.final > maxFinal {
				c.dropFinal(key)
			}
		}
		c.mu.Unlock()
		close(f.done)
	}()
	return f
}

// evict drops the reads that are done and stale. Called with c.mu held.
func (c *cache) evict() {
	for k, f := range c.entries {
		select {
		case <-f.done:
			if !f.final && c.now().Sub(f.at) >= c.refresh {
				delete(c.entries, k)
			}
		default:
		}
	}
	if len(c.entries) >= maxEntries { // everything fresh or final: drop the final ones
		for k, f := range c.entries {
			if f.final {
				delete(c.entries, k)
				c.final--
			}
		}
	}
}

// dropFinal forgets one final read other than keep. Called with c.mu held.
func (c *cache) dropFinal(keep string) {
	for k, f := range c.entries {
		if f.final && k != keep {
			delete(c.entries, k)
			c.final--
			return
		}
	}
}

// forget drops the read of key, if it is done: the next get reads again.
func (c *cache) forget(key string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	f := c.entries[key]
	if f == nil {
		return
	}
	select {
	case <-f.done:
		if f.final {
			c.final--
		}
		delete(c.entries, key)
	default:
	}
}

func (c *cache) started() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.loads
}

// wait waits for the reads in flight; cancel the base context first.
func (c *cache) wait() { c.wg.Wait() }
