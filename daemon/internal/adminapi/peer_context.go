package adminapi

import "context"

// WithPeer returns ctx carrying p as the caller's credentials, as the
// socket listener records them for every connection. It is for callers in
// the same process (and tests) that need rules which depend on who calls,
// such as the two-person rule of approvals, to see a given uid; a request
// from outside the process cannot reach it.
func WithPeer(ctx context.Context, p PeerCred) context.Context {
	return context.WithValue(ctx, peerKey{}, p)
}
