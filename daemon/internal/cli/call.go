package cli

import (
	"context"
	"net/url"
	"time"

	"github.com/lifecycled/lifecycled/daemon/adminclient"
)

// call is one request of a command to the daemon's API. Its shape is the
// client's methods' own, so that (*client).Status is a call as it is; opts
// are what the command adds (an Idempotency-Key for a change) and the
// capture of the raw answer.
type call[T any] func(c *client, ctx context.Context, opts ...adminclient.Option) (T, error)

// bind makes a call of a method that takes one argument first (a tenant,
// a dead letter's ID, a topic).
func bind[T any](arg string, method func(*client, context.Context, string, ...adminclient.Option) (T, error)) call[T] {
	return func(c *client, ctx context.Context, opts ...adminclient.Option) (T, error) {
		return method(c, ctx, arg, opts...)
	}
}

// query makes a call of a method that takes a query (filters, a page).
func query[T any](q url.Values, method func(*client, context.Context, url.Values, ...adminclient.Option) (T, error)) call[T] {
	return func(c *client, ctx context.Context, opts ...adminclient.Option) (T, error) {
		return method(c, ctx, q, opts...)
	}
}

// fetch makes one call within timeout: the answer, and its raw JSON for
// --format json, which prints the daemon's answer unchanged.
func fetch[T any](g *globals, timeout time.Duration, do call[T], opts ...adminclient.Option) (T, []byte, error) {
	c, err := g.client()
	if err != nil {
		var zero T
		return zero, nil, err
	}
	return within(c, timeout, do, opts...)
}

// within is fetch on a client the command goes on using (to wait for a
// job, to page): the timeout is the call's alone.
func within[T any](c *client, timeout time.Duration, do call[T], opts ...adminclient.Option) (T, []byte, error) {
	ctx, cancel := withTimeout(timeout)
	defer cancel()
	var raw []byte
	body, err := do(c, ctx, append(opts, adminclient.Raw(&raw))...)
	return body, raw, err
}

// show makes one call within timeout and, for --format json, prints its
// raw answer: printed says so, and the command then prints nothing more
// (it may still decide its exit code from the answer).
func show[T any](g *globals, timeout time.Duration, do call[T], opts ...adminclient.Option) (body T, printed bool, err error) {
	body, raw, err := fetch(g, timeout, do, opts...)
	if err != nil || !g.json() {
		return body, false, err
	}
	g.printRaw(raw)
	return body, true, nil
}
