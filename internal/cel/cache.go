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

// Get returns the compiled policy for p's UID and generation, compiling it
// if the cache holds another generation or none.
func (c *Cache) Get(p *v1alpha1.CleanupPolicy) (*Policy, field.ErrorList) {
	return c.Load(p.UID, p.Generation, func() (*v1alpha1.CleanupPolicy, field.ErrorList) { return p, nil })
}

// Load returns the compiled policy of the given UID and generation. When the
// cache holds another generation or none, it calls decode for the policy
// and compiles it; the errors of a policy that does not decode are kept as
// its compile errors are, so a stored policy is decoded once per generation.
func (c *Cache) Load(uid types.UID, generation int64, decode func() (*v1alpha1.CleanupPolicy, field.ErrorList)) (*Policy, field.ErrorList) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.entries[uid]; ok && e.generation == generation {
		return e.policy, e.errs
	}
	c.compilations.Add(1)
	p, errs := decode()
	var policy *Policy
	if len(errs) == 0 {
		policy, errs = Compile(c.env, p)
	}
	c.entries[uid] = &cacheEntry{generation: generation, policy: policy, errs: errs}
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
