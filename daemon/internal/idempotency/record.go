package idempotency

import (
	"context"
	"net/http"
	"time"
)

// State of a key.
type State string

// States.
const (
	StateInFlight State = "IN_FLIGHT"
	StateDone     State = "DONE"
)

// Record is one stored Idempotency-Key.
type Record struct {
	CallerUID   uint32
	Key         string
	Route       string
	RequestHash string
	State       State
	Response    Response // once State is DONE
	CreatedAt   time.Time
	LockedAt    time.Time
	ExpiresAt   time.Time
}

// Response is a stored answer: what a replay gives back.
type Response struct {
	Status  int
	Headers http.Header // the headers that matter (Location, ...)
	Body    []byte
}

// Store is what the middleware needs from the state store.
type Store interface {
	// ReserveIdempotencyKey stores rec as IN_FLIGHT unless a live record
	// holds the key. A record is not live when it expired, or when it is
	// IN_FLIGHT and was locked before staleBefore (its request died). When the
	// key is held, the holder is returned and nothing is written.
	ReserveIdempotencyKey(ctx context.Context, rec Record, now, staleBefore time.Time) (holder *Record, err error)
	// CompleteIdempotencyKey stores the response of the request that holds the key.
	CompleteIdempotencyKey(ctx context.Context, uid uint32, key, requestHash string, resp Response, expiresAt time.Time) error
	// ReleaseIdempotencyKey forgets a reservation whose request did not
	// complete, so that a retry with the same key runs again.
	ReleaseIdempotencyKey(ctx context.Context, uid uint32, key, requestHash string) error
}
