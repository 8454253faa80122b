// Package e2e holds lifecycled's end-to-end tests: the real daemon binary as
// a subprocess, its real plugins, and real PostgreSQL, Redis, dynalite and
// Kafka (kfake) servers, driven through the admin socket and the CLI the way
// an operator drives them.
package e2e
