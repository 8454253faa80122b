// Package bulk runs one action (retry, delete, mark dead, revive, replay
// to a topic) on every dead letter a filter matched when it started, a
// page at a time under a lease any daemon sharing the store can take
// over; retry-all is one of them, run by the request that asked for it.
package bulk

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/hashicorp/go-hclog"

	"github.com/lifecycled/lifecycled/daemon/internal/derrors"
	"github.com/lifecycled/lifecycled/daemon/internal/dlq"
)

// Service starts, lists, cancels and runs bulk operations on dead
// letters, and retry-all; each message is sent, replayed or revived
// through the dead-letter manager, under its rules.
type Service struct {
	mgr   *dlq.Service
	store dlq.Store
	log   hclog.Logger
	// pageCap, when set (tests), caps the page size: a test puts several
	// pages at the broker with few messages.
	pageCap int
	// runner runs the operations; nil until NewRunner.
	runner *Runner
	// retryPages has a slot for each page of a bulk retry under way on
	// this daemon, whatever operation (or retry-all) it is of: on
	// PostgreSQL each holds a state-store connection while its broker
	// answers, and the intake, the leases' heartbeats and the API need
	// the rest of the pool.
	retryPages chan struct{}
	// signals are off except in tests, which wait on them for another
	// daemon to reach a point of a bulk operation.
	signals Signals
}

// NewService returns the bulk operations of mgr's dead letters, kept in
// store.
func NewService(mgr *dlq.Service, store dlq.Store, log hclog.Logger) *Service {
	return &Service{mgr: mgr, store: store, log: log.Named("dlq.bulk"), retryPages: make(chan struct{}, retryWorkers)}
}

// CapPages caps the page size of the operations s runs from now on at n.
// Tests call it before anything runs, to put several pages at a broker
// with few messages; nothing else does.
func (s *Service) CapPages(n int) { s.pageCap = n }

// Request is POST /api/v1/dlq/operations.
type Request struct {
	Action      dlq.OperationAction
	Filter      dlq.OperationFilter
	FilterJSON  []byte // the filter as the caller gave it, kept for display
	TargetTopic string
	Rate        float64
	UID         *uint32
}

// MaxIDs bounds an explicit id list: as JSON it must fit the
// admin API's 1 MiB request body (about 39 bytes an id).
const MaxIDs = 20000

// check is validate, and for replay_to that the target is not a DLQ
// topic (checked once here; each message's own DLQ topic is one too).
func (s *Service) check(ctx context.Context, r *Request) error {
	if err := r.validate(); err != nil {
		return err
	}
	if r.Action == dlq.ActionReplayTo {
		if err := s.mgr.NotADLQTopic(ctx, r.TargetTopic); err != nil {
			return fmt.Errorf("target_topic: %w", err)
		}
	}
	return nil
}

// validate checks a request before anything is stored.
func (r *Request) validate() error {
	if _, err := dlq.ParseOperationAction(string(r.Action)); err != nil {
		return err
	}
	switch {
	case r.Action == dlq.ActionReplayTo && r.TargetTopic == "":
		return fmt.Errorf("%w: target_topic is required for replay_to", derrors.ErrInvalid)
	case r.Action != dlq.ActionReplayTo && r.TargetTopic != "":
		return fmt.Errorf("%w: target_topic is only for replay_to", derrors.ErrInvalid)
	case r.Rate < 0:
		return fmt.Errorf("%w: rate must not be negative", derrors.ErrInvalid)
	case len(r.Filter.IDs) > MaxIDs:
		return fmt.Errorf("%w: ids: at most %d", derrors.ErrInvalid, MaxIDs)
	case r.Filter.Search.IncludeArchived:
		return fmt.Errorf("%w: filter.include_archived: archived messages are never acted on", derrors.ErrInvalid)
	}
	if r.TargetTopic != "" {
		if err := dlq.ValidTopic(r.TargetTopic); err != nil {
			return fmt.Errorf("target_topic: %w", err)
		}
	}
	return nil
}

// DryRunOperation says how many messages the request would act on now,
// with a sample of them; nothing is stored or changed.
func (s *Service) DryRunOperation(ctx context.Context, req Request, sample int) (int64, []dlq.Message, error) {
	if err := s.check(ctx, &req); err != nil {
		return 0, nil, err
	}
	return s.store.CountDLQOperation(ctx, req.Filter, sample)
}

// StartOperation stores a bulk operation with the set of messages its
// filter matches now and hands it to the runner.
func (s *Service) StartOperation(ctx context.Context, req Request) (*dlq.Operation, error) {
	if err := s.check(ctx, &req); err != nil {
		return nil, err
	}
	filter := req.FilterJSON
	if len(filter) == 0 {
		filter = []byte("{}")
	}
	now := s.mgr.Now()
	op, err := s.store.CreateDLQOperation(ctx, dlq.Operation{ID: uuid.New(), Action: req.Action, State: dlq.OperationRunning, Filter: filter,
		TargetTopic: req.TargetTopic, Rate: req.Rate, CreatedAt: now, UpdatedAt: now, RequestedByUID: req.UID,
		Outcomes: map[string]int64{}}, req.Filter)
	if err != nil {
		return nil, err
	}
	s.log.Info("bulk operation started", "operation", op.ID.String(), "action", op.Action, "matched", op.Matched, "rate", op.Rate, "uid", uidOf(req.UID))
	if s.runner != nil {
		s.runner.Kick()
	}
	return op, nil
}

// Operation returns one operation.
func (s *Service) Operation(ctx context.Context, id uuid.UUID) (*dlq.Operation, error) {
	return s.store.GetDLQOperation(ctx, id)
}

// OperationFailures returns up to limit items of an operation that did not
// succeed, with why.
func (s *Service) OperationFailures(ctx context.Context, id uuid.UUID, limit int) ([]dlq.ItemResult, error) {
	return s.store.DLQOperationFailures(ctx, id, limit)
}

// Operations lists operations, newest first.
func (s *Service) Operations(ctx context.Context, limit int, runningOnly bool) ([]dlq.Operation, error) {
	return s.store.ListDLQOperations(ctx, limit, runningOnly)
}

// CancelOperation stops an operation between two messages (at the end of
// the page in flight): the daemon running it stops at once when it is
// this one, another one at its next lease renewal.
func (s *Service) CancelOperation(ctx context.Context, id uuid.UUID, uid *uint32) (*dlq.Operation, error) {
	op, err := s.store.CancelDLQOperation(ctx, id, uid, s.mgr.Now())
	if err != nil {
		return nil, err
	}
	if s.runner != nil {
		s.runner.interrupt(id)
	}
	s.log.Info("bulk operation cancel requested", "operation", id.String(), "uid", uidOf(uid))
	return op, nil
}

// WaitOperation polls an operation until it is over or ctx ends.
func (s *Service) WaitOperation(ctx context.Context, id uuid.UUID, every time.Duration) (*dlq.Operation, error) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		op, err := s.store.GetDLQOperation(ctx, id)
		if err != nil || op.Finished() {
			return op, err
		}
		select {
		case <-ctx.Done():
			return op, ctx.Err()
		case <-t.C:
		}
	}
}

func uidOf(uid *uint32) any {
	if uid == nil {
		return "-"
	}
	return *uid
}

// FilterJSON is the stored form of a filter for display.
func FilterJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		return []byte("{}")
	}
	return b
}
