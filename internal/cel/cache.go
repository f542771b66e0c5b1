package cel

import (
	"sync"
	"sync/atomic"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/fleetops-dev/cleanup-operator/api/v1alpha1"
)

// Cache holds compiled policies by (UID, generation). A policy is compiled
// once per generation, errors included: a broken generation is not
// recompiled on every reconcile, and the next generation always is.
type Cache struct {
	env          *Env
	mu           sync.Mutex
	entries      map[types.UID]*cacheEntry
	compilations atomic.Int64
}

type cacheEntry struct {
	generation int64
	policy     *Policy
	errs       field.ErrorList
}

// NewCache returns an empty cache compiling with env.
func NewCache(env *Env) *Cache {
	return &Cache{env: env, entries: map[types.UID]*cacheEntry{}}
}

// Env is the environment the cache compiles with.
func (c *Cache) Env() *Env { return c.env }

// Get returns the compiled policy for p's UID and generation, compiling it
// if the cache holds another generation or none.
func (c *Cache) Get(p *v1alpha1.CleanupPolicy) (*Policy, field.ErrorList) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.entries[p.UID]; ok && e.generation == p.Generation {
		return e.policy, e.errs
	}
	c.compilations.Add(1)
	policy, errs := Compile(c.env, p)
	c.entries[p.UID] = &cacheEntry{generation: p.Generation, policy: policy, errs: errs}
	return policy, errs
}

// Retain forgets every policy whose UID is not in live.
func (c *Cache) Retain(live sets.Set[types.UID]) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for uid := range c.entries {
		if !live.Has(uid) {
			delete(c.entries, uid)
		}
	}
}

// Compilations counts the compilations the cache has run.
func (c *Cache) Compilations() int64 { return c.compilations.Load() }

// Len is the number of policies cached.
func (c *Cache) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.entries)
}
