// Command lifecycled-plugin-pgtable is the DLQSource for a table of failed
// jobs in PostgreSQL (the source design's failed_jobs, or any table like
// it): its rows are the dead letters, taken in once each and never
// changed; a retry calls the application's reprocess endpoint over HTTP
// (with an Idempotency-Key per attempt, and the design's retry rules for
// 5xx, 408 and 429 with Retry-After) or inserts the payload into a queue
// table; a row whose retry succeeded is marked resolved, or deleted when
// the config says so.
package main

import "github.com/lifecycled/lifecycled/sdk"

func main() { sdk.ServeDLQSource(newSource()) }
