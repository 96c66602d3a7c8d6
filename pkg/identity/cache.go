package identity

import (
	"container/list"
	"context"
	"crypto/sha256"
	"sync"
	"time"

	"github.com/leasehold/leasehold/pkg/auth"
)

// tokenKey is a token's SHA-256: the cache never holds a usable token.
type tokenKey [sha256.Size]byte

func keyOf(tok string) tokenKey { return sha256.Sum256([]byte(tok)) }

// result is one validation outcome: an identity, or the Unauthorized
// error of a token Keystone does not accept (cached too, so a flood of
// one bogus token costs one Keystone call per cache period).
type result struct {
	id  *auth.Identity
	err error
}

type cacheEntry struct {
	key     tokenKey
	res     result
	expires time.Time
}

// tokenCache is a size-bounded LRU of validation results, each valid
// until its own expiry time. Safe for concurrent use.
type tokenCache struct {
	mu    sync.Mutex
	max   int
	ll    *list.List // front = most recently used
	items map[tokenKey]*list.Element
}

func newTokenCache(max int) *tokenCache {
	return &tokenCache{max: max, ll: list.New(), items: make(map[tokenKey]*list.Element)}
}

// get returns the result cached for key if it has not expired at now.
func (c *tokenCache) get(key tokenKey, now time.Time) (result, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.items[key]
	if !ok {
		return result{}, false
	}
	e := el.Value.(*cacheEntry)
	if !now.Before(e.expires) {
		c.ll.Remove(el)
		delete(c.items, key)
		return result{}, false
	}
	c.ll.MoveToFront(el)
	return e.res, true
}

// put stores res for key until expires, dropping the least recently
// used entries beyond the size limit.
func (c *tokenCache) put(key tokenKey, res result, expires time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.items[key]; ok {
		e := el.Value.(*cacheEntry)
		e.res, e.expires = res, expires
		c.ll.MoveToFront(el)
		return
	}
	c.items[key] = c.ll.PushFront(&cacheEntry{key: key, res: res, expires: expires})
	for c.ll.Len() > c.max {
		last := c.ll.Back()
		c.ll.Remove(last)
		delete(c.items, last.Value.(*cacheEntry).key)
	}
}

// len is the number of entries held (expired ones included until seen).
func (c *tokenCache) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.ll.Len()
}

// flightGroup runs one validation per token at a time: callers with the
// same key while one is running wait for its result instead of asking
// Keystone again.
type flightGroup struct {
	mu      sync.Mutex
	m       map[tokenKey]*flight
	waiters int
}

type flight struct {
	done chan struct{}
	res  result
}

// waiting counts the callers waiting on another caller's flight.
func (g *flightGroup) waiting() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.waiters
}

// do runs fn for key unless a run for key is under way, in which case it
// waits for that run's result (or for ctx to end, giving ctxErr).
func (g *flightGroup) do(ctx context.Context, key tokenKey, fn func() result, ctxErr func(error) result) result {
	g.mu.Lock()
	if g.m == nil {
		g.m = make(map[tokenKey]*flight)
	}
	if f, ok := g.m[key]; ok {
		g.waiters++
		g.mu.Unlock()
		defer func() {
			g.mu.Lock()
			g.waiters--
			g.mu.Unlock()
		}()
		select {
		case <-f.done:
			return f.res
		case <-ctx.Done():
			return ctxErr(ctx.Err())
		}
	}
	f := &flight{done: make(chan struct{})}
	g.m[key] = f
	g.mu.Unlock()
	defer func() {
		g.mu.Lock()
		delete(g.m, key)
		g.mu.Unlock()
		close(f.done)
	}()
	f.res = fn()
	return f.res
}
