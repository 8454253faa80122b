package adminapi

import (
	"context"
	"net/http"
	"strings"
)

type viaConsoleKey struct{}

// WithConsole marks ctx as a request the web console makes on behalf of its
// caller, so that the audit line of the API call says it came through the
// console. Only code in the daemon can set it: a socket client cannot.
func WithConsole(ctx context.Context) context.Context {
	return context.WithValue(ctx, viaConsoleKey{}, true)
}

// viaConsole reports whether r came through the console: a page of /ui/
// itself, or an API call the console made for one.
func viaConsole(r *http.Request) bool {
	v, _ := r.Context().Value(viaConsoleKey{}).(bool)
	return v || r.URL.Path == "/ui" || strings.HasPrefix(r.URL.Path, "/ui/")
}

// MayMutate reports whether peer may make mutating requests under the
// policy: the console shows its controls only to callers the API would let
// through (and the API refuses the others all the same).
func (p AccessPolicy) MayMutate(peer PeerCred) bool {
	ok, _ := p.allows(peer, http.MethodPost)
	return ok
}
