package config

import "sync/atomic"

// Holder gives every component the current config; SIGHUP swaps it.
type Holder struct {
	p atomic.Pointer[Config]
}

// NewHolder returns a Holder holding c.
func NewHolder(c *Config) *Holder {
	h := &Holder{}
	h.p.Store(c)
	return h
}

// Get returns the current config. Callers must not modify it.
func (h *Holder) Get() *Config { return h.p.Load() }

// Set replaces the current config.
func (h *Holder) Set(c *Config) { h.p.Store(c) }
