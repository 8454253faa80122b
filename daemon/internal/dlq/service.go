package dlq

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/hashicorp/go-hclog"

	"github.com/lifecycled/lifecycled/daemon/internal/derrors"
	"github.com/lifecycled/lifecycled/daemon/internal/retry"
	"github.com/lifecycled/lifecycled/sdk"
)

// Sources is where the manager finds the plugins that took messages in and
// can republish them (the plugin host).
type Sources interface {
	SourceNames() []string
	Source(name string) (sdk.DLQSource, error)
	Running(name string) bool
	// Traits are what the named source declared when it started
	// (sdk.SourceTraits); zero when it is not running.
	Traits(name string) sdk.SourceTraits
}

// Policy is the retry policy, read at every use so a reload applies at once.
type Policy struct {
	AutoRetry  bool
	MaxRetries int
	Backoff    retry.Policy
	Lease      time.Duration
	// AutoPauseReturns and AutoPauseWindow: a DLQ topic whose replays came
	// back this many times within the window is paused (0: never).
	AutoPauseReturns int
	AutoPauseWindow  time.Duration
	// ReplayTargets are globs on the topics a DLQ topic's messages may
	// name as their origin (see ReplayTargetsOf); nil: from its name.
	ReplayTargets []string
	// ForTopic gives the policy of one DLQ topic ([[dlq.topic]] blocks);
	// nil when every topic has this one. Use For.
	ForTopic func(topic string) Policy
}

// Trigger says who asked for a retry, for metrics.
type Trigger string

// Triggers.
const (
	TriggerManual   Trigger = "manual"
	TriggerRetryAll Trigger = "retry_all"
	TriggerAuto     Trigger = "auto"
	// TriggerBulk: a bulk retry operation (POST /api/v1/dlq/operations).
	TriggerBulk Trigger = "bulk"
)

// ErrRepublishFailed means the broker refused the message itself (too large,
// rejected topic): the attempt counted against max_retries.
var ErrRepublishFailed = errors.New("republish failed")

// Service is the dead-letter manager's API.
type Service struct {
	store   Store
	sources Sources
	policy  func() Policy
	owner   string
	log     hclog.Logger
	metrics *Metrics
	now     func() time.Time
	rnd     func() float64 // jitter source
	// inFlight counts, by message, the holds (HoldClaims) under which this
	// daemon is sending it: see Sending.
	sendingMu sync.Mutex
	inFlight  map[uuid.UUID]int
	// claimPace, when set, paces the renewals of the leases of messages
	// being sent (default: a ticker at a third of the lease);
	// claimRenewed, when set, is called after each renewal. Tests set
	// both (WithClaimPace), to renew as their clock moves.
	claimPace    func(lease time.Duration) (ticks <-chan time.Time, stop func())
	claimRenewed func()
	// recordTimeout bounds one recording of send outcomes; a recording
	// that fails is tried again in the background (recordLater) until it
	// succeeds or the service stops.
	recordTimeout time.Duration
	stopping      chan struct{}
	stopOnce      sync.Once
}

// NewService returns the manager. owner names this daemon in leases.
func NewService(store Store, sources Sources, policy func() Policy, owner string, log hclog.Logger, m *Metrics, opts ...Option) *Service {
	s := &Service{store: store, sources: sources, policy: policy, owner: owner, log: log.Named("dlq"), metrics: m,
		now: time.Now, rnd: rand.Float64, recordTimeout: 30 * time.Second, stopping: make(chan struct{})}
	for _, o := range opts {
		o(s)
	}
	return s
}

// Stop ends the background recordings of send outcomes (recordLater):
// their messages' leases then run out, and another daemon may send them
// again (at least once).
func (s *Service) Stop(context.Context) error {
	s.stopOnce.Do(func() { close(s.stopping) })
	return nil
}

// Owner names this daemon in leases.
func (s *Service) Owner() string { return s.owner }

// Now is the service's clock (tests set it).
func (s *Service) Now() time.Time { return s.now() }

// Policy is the retry policy now.
func (s *Service) Policy() Policy { return s.policy() }

// List returns a page of a topic's messages, newest first.
func (s *Service) List(ctx context.Context, f ListFilter) ([]Message, int64, error) {
	return s.store.ListDLQ(ctx, f)
}

// Get returns one message.
func (s *Service) Get(ctx context.Context, id uuid.UUID) (*Message, error) {
	return s.store.GetDLQ(ctx, id)
}

// Delete removes one message.
func (s *Service) Delete(ctx context.Context, id uuid.UUID) error { return s.store.DeleteDLQ(ctx, id) }

// Topics summarises every DLQ topic, with the PENDING messages of sources
// that are not configured.
func (s *Service) Topics(ctx context.Context) ([]TopicSummary, error) {
	topics, err := s.store.DLQTopics(ctx)
	if err != nil {
		return nil, err
	}
	orphans, err := s.store.PendingBySourceDLQ(ctx, s.sources.SourceNames())
	if err != nil {
		return nil, err
	}
	index := map[string]int{}
	for i, t := range topics {
		index[t.Topic] = i
	}
	for _, o := range orphans {
		i, ok := index[o.Topic]
		if !ok {
			continue
		}
		if topics[i].UnconfiguredSources == nil {
			topics[i].UnconfiguredSources = map[string]int64{}
		}
		topics[i].UnconfiguredSources[o.Source] += o.Pending
	}
	return s.withPauses(ctx, topics, index)
}

// SourceConfigured reports whether a [[dlq_source]] named name is
// configured: the messages of one that is not are not retried.
func (s *Service) SourceConfigured(name string) bool {
	_, err := s.sources.Source(name)
	return err == nil
}

// Retry republishes one message now. It returns the message as stored
// after the broker's acknowledgement (RESOLVED); a *NotRetryableError
// (409); derrors.ErrUnavailable when no source can republish it (nothing
// counted, 503); ErrRepublishFailed when the broker refused it (counted);
// or derrors.ErrConflict when the broker acknowledged it but the message was
// no longer under this retry's claim, so RESOLVED was not recorded (409).
func (s *Service) Retry(ctx context.Context, id uuid.UUID) (*Message, error) {
	return s.retry(ctx, id, nil)
}

// RetryAs is Retry asked for by the operator uid, who the attempt's
// history entry names.
func (s *Service) RetryAs(ctx context.Context, id uuid.UUID, uid uint32) (*Message, error) {
	return s.retry(ctx, id, &uid)
}

func (s *Service) retry(ctx context.Context, id uuid.UUID, uid *uint32) (*Message, error) {
	cur, err := s.store.GetDLQ(ctx, id)
	if err != nil {
		return nil, err
	}
	if !cur.IsRetryable() {
		return nil, &NotRetryableError{Message: cur, Reason: cur.NotRetryableReason()}
	}
	// Check the source before claiming, so an unavailable source leaves the
	// message exactly as it was.
	if _, err := s.source(cur.Position.Source); err != nil {
		return nil, err
	}
	pol := s.policy()
	now := s.now()
	claim := Claim{Owner: s.owner, Now: now, LeaseUntil: now.Add(pol.Lease)}
	m, err := s.store.ClaimDLQ(ctx, id, claim)
	if err != nil {
		return nil, err
	}
	results, err := s.republish(ctx, []Message{*m}, claim, TriggerManual, uid)
	if err != nil {
		return nil, err
	}
	r := results[0]
	// Say what is stored, never what was hoped for.
	stored := func() string {
		if r.Applied {
			return fmt.Sprintf("; now status=%s, retry_count=%d/%d", r.Record.To.Status, r.Record.To.RetryCount, r.Record.To.MaxRetries)
		}
		if after, err := s.store.GetDLQ(ctx, id); err == nil {
			return fmt.Sprintf("; now status=%s, retry_count=%d/%d", after.Status, after.RetryCount, after.MaxRetries)
		}
		return ""
	}
	switch {
	case r.Outcome.Event == EventAcked && r.Applied:
		m.Status, m.RetryCount = r.Record.To.Status, r.Record.To.RetryCount
		return m, nil
	case r.Outcome.Event == EventAcked:
		return nil, fmt.Errorf("%w: the broker acknowledged the republish, but the message changed meanwhile (its lease ran out) "+
			"and was not marked RESOLVED%s", derrors.ErrConflict, stored())
	case r.Outcome.Event == EventReleased && r.Applied && r.Record.To.Status == StatusPending:
		return nil, fmt.Errorf("%w: %s; the message stays PENDING, nothing counted", derrors.ErrUnavailable, r.Outcome.Error)
	case r.Outcome.Event == EventReleased:
		return nil, fmt.Errorf("%w: %s; nothing counted%s", derrors.ErrUnavailable, r.Outcome.Error, stored())
	default:
		return nil, fmt.Errorf("%w: %s%s", ErrRepublishFailed, r.Outcome.Error, stored())
	}
}

// source returns the named source if it can republish now.
func (s *Service) source(name string) (sdk.DLQSource, error) {
	src, err := s.sources.Source(name)
	if err != nil {
		return nil, fmt.Errorf("%w: no source can republish: source %q is not configured", derrors.ErrUnavailable, name)
	}
	if !s.sources.Running(name) {
		return nil, fmt.Errorf("%w: no source can republish: source %q is not running", derrors.ErrUnavailable, name)
	}
	return src, nil
}

// Result is what became of one claimed message: the outcome of its
// attempt and what the store recorded.
type Result struct {
	Outcome Outcome
	Recorded
}

// republish sends messages claimed by claim through their sources, the
// claim's lease renewed meanwhile, and records the outcomes, each with an
// entry in the message's attempts history. A message is RESOLVED only
// when its source reports the broker's acknowledgement and the message is
// still under this claim when that is recorded. uid names the operator
// who asked, if one did.
func (s *Service) republish(ctx context.Context, msgs []Message, claim Claim, trigger Trigger, uid *uint32) ([]Result, error) {
	// Held until the outcomes are recorded, not only sent: a recording
	// that waits past the lease must not let this daemon take the
	// messages over and send them again.
	release := s.HoldClaims(ctx, msgs, claim)
	outcomes, _ := s.Send(ctx, msgs, trigger, uid, nil)
	record := func(ctx context.Context, outcomes []Outcome) ([]Recorded, error) {
		return s.store.FinishDLQ(ctx, s.owner, s.now(), outcomes)
	}
	results, err := s.recordOutcomes(ctx, outcomes, trigger, record)
	if err != nil {
		// The sends happened: until their outcomes are recorded, this
		// daemon must not send the messages again (a recording past the
		// lease let its retry loop do so), so the hold stays while the
		// recording is tried again in the background.
		go s.recordLater(outcomes, trigger, record, release)
		return nil, err
	}
	release()
	return results, nil
}

// recordLater records send outcomes whose recording failed (the state
// store down or slow), trying again with a growing pause, then releases
// their hold. It gives up when the service stops.
func (s *Service) recordLater(outcomes []Outcome, trigger Trigger, record func(context.Context, []Outcome) ([]Recorded, error), release func()) {
	defer release()
	pause := time.Second
	for {
		select {
		case <-s.stopping:
			s.log.Warn("stopping with retry outcomes not recorded: their messages may be sent again once their lease ends", "count", len(outcomes))
			return
		case <-time.After(pause):
		}
		_, err := s.recordOutcomes(context.Background(), outcomes, trigger, record)
		if err == nil {
			s.log.Info("recorded retry outcomes once the state store answered", "count", len(outcomes))
			return
		}
		s.log.Warn("could not record retry outcomes; trying again (the messages are held meanwhile)", "count", len(outcomes), "error", err)
		pause = min(2*pause, 30*time.Second)
	}
}

// Send republishes claimed messages through their sources and returns the
// outcome of each, in the order of msgs, to be recorded, and the error of
// each source that could not try at all (not configured, not running,
// unreachable), by name: its messages' outcomes are releases.
func (s *Service) Send(ctx context.Context, msgs []Message, trigger Trigger, uid *uint32, op *uuid.UUID) ([]Outcome, map[string]error) {
	var down map[string]error
	pol := s.policy()
	outcomes := make([]Outcome, len(msgs))
	bySource := map[string][]int{}
	for i, m := range msgs {
		if m.Truncated {
			// Nothing to send: the value was not kept at intake.
			outcomes[i] = Finish(m, EventRefused)
			outcomes[i].Error = "the message was too large to take in whole and its value was not kept: it cannot be republished"
			continue
		}
		if why := outsideTargets(&m, ReplayTargetsOf(pol, m.Position.Topic)); why != "" {
			// Stored before its DLQ topic's targets were narrowed: refused
			// here whatever asked, counted, so it ends DEAD, not in a loop.
			outcomes[i] = Finish(m, EventRefused)
			outcomes[i].Error = why
			continue
		}
		bySource[m.Position.Source] = append(bySource[m.Position.Source], i)
	}
	for name, idx := range bySource {
		src, err := s.source(name)
		var resp *sdk.RepublishResponse
		if err == nil {
			req := &sdk.RepublishRequest{Messages: make([]sdk.RepublishMessage, len(idx))}
			for j, i := range idx {
				m := &msgs[i]
				req.Messages[j] = sdk.RepublishMessage{ID: m.ID.String(), Topic: m.OriginalTopic, Key: m.Key, Headers: RepublishHeaders(m), Value: m.Payload}
			}
			resp, err = src.Republish(ctx, req)
			if err == nil && len(resp.Results) != len(idx) {
				err = fmt.Errorf("source %s answered %d results for %d messages", name, len(resp.Results), len(idx))
			}
		}
		for j, i := range idx {
			switch {
			case err != nil:
				// The source could not try: not the message's fault.
				if down == nil {
					down = map[string]error{}
				}
				down[name] = err
				outcomes[i] = Finish(msgs[i], EventReleased)
				outcomes[i].Error = err.Error()
			case resp.Results[j].Acked:
				outcomes[i] = Finish(msgs[i], EventAcked)
			case retry.Classify(resp.Results[j].Err).Retry:
				outcomes[i] = Finish(msgs[i], EventReleased)
				outcomes[i].Error = resp.Results[j].Err.Error()
			default:
				outcomes[i] = Finish(msgs[i], EventRefused)
				outcomes[i].Error = resp.Results[j].Err.Error()
			}
		}
	}
	now := s.now()
	for i := range outcomes {
		o := &outcomes[i]
		o.At, o.Trigger, o.Attempted, o.UID, o.Operation = now, trigger, true, uid, op
		o.Error = sanitize(o.Error, maxErrorLength)
		o.NextRetryAt = s.retryAfter(pol.For(msgs[i].Position.Topic))
	}
	return outcomes, down
}

// recordOutcomes records what Send returned (with record), counts it in
// the metrics and logs what did not resolve.
func (s *Service) recordOutcomes(ctx context.Context, outcomes []Outcome, trigger Trigger,
	record func(ctx context.Context, outcomes []Outcome) ([]Recorded, error)) ([]Result, error) {
	// Record with a context of its own: a cancelled request must not leave
	// acknowledged messages looking unresolved until their lease ends.
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.recordTimeout)
	defer cancel()
	recorded, err := record(wctx, outcomes)
	if err != nil {
		return nil, fmt.Errorf("record retry outcomes: %w", err)
	}
	return s.CountOutcomes(outcomes, recorded, trigger), nil
}

// CountOutcomes counts recorded outcomes in the metrics and logs what did
// not resolve.
func (s *Service) CountOutcomes(outcomes []Outcome, recorded []Recorded, trigger Trigger) []Result {
	results := make([]Result, len(outcomes))
	for i, o := range outcomes {
		results[i] = Result{Outcome: o, Recorded: recorded[i]}
		outcome := o.Name()
		if recorded[i].Applied {
			outcome = recorded[i].Record.Name
		}
		s.metrics.retries.WithLabelValues(o.Source, outcome, string(trigger)).Inc()
		switch {
		case !recorded[i].Applied:
			s.log.Warn("retry outcome not recorded: the message is no longer under this claim (its lease ran out)",
				"id", o.ID.String(), "outcome", outcome, "trigger", trigger)
		case outcome != OutcomeResolved:
			s.log.Warn("retry did not resolve", "id", o.ID.String(), "outcome", outcome, "error", o.Error, "trigger", trigger)
		}
	}
	return results
}

// retryAfter gives the next automatic retry of a message sent back to
// PENDING with a number of attempts counted, each with its own jitter; nil
// when automatic retries are off.
func (s *Service) retryAfter(pol Policy) func(attempts int) *time.Time {
	if !pol.AutoRetry {
		return nil
	}
	return func(attempts int) *time.Time { return s.nextRetry(pol, attempts) }
}

// nextRetry draws its own jitter for every message.
func (s *Service) nextRetry(pol Policy, attempt int) *time.Time {
	if !pol.AutoRetry {
		return nil
	}
	t := s.now().Add(pol.Backoff.DelayRand(attempt, s.rnd))
	return &t
}

// Revive gives a DEAD message another chance: back to PENDING with its
// attempts reset and the current max_retries, due for an automatic retry
// after the first backoff delay. uid is the caller's, for the history (the
// admin API's audit log has it too). It returns derrors.ErrNotFound or a
// *NotRevivableError (409).
func (s *Service) Revive(ctx context.Context, id uuid.UUID, uid uint32) (*Message, error) {
	// The topic's policy gives the attempts it gets.
	cur, err := s.store.GetDLQ(ctx, id)
	if err != nil {
		return nil, err
	}
	m, err := s.store.ReviveDLQ(ctx, id, s.ReviveFor(cur.Position.Topic, &uid, nil))
	if err != nil {
		return nil, err
	}
	s.log.Info("revived a dead message", "id", id.String(), "uid", uid)
	return m, nil
}

// ReviveFor is the revive of a DEAD message of a DLQ topic: the topic's
// policy gives the attempts it gets and its first retry. uid and op name
// who asked, for the history.
func (s *Service) ReviveFor(topic string, uid *uint32, op *uuid.UUID) Revive {
	pol := s.policy().For(topic)
	now := s.now()
	from := State{Status: StatusDead, MaxRetries: max(pol.MaxRetries, 1)}
	to, _ := from.Next(EventRevived)
	return Revive{Now: now, From: from.Status, To: to, NextRetryAt: s.nextRetry(pol, to.RetryCount),
		Attempt: Attempt{At: now, Outcome: OutcomeRevived, UID: uid, Operation: op}}
}

// CountRetryable is the dry run of RetryAll: how many messages of the topic
// it would republish now. Nothing is claimed or changed.
func (s *Service) CountRetryable(ctx context.Context, topic string) (int64, error) {
	return s.store.CountRetryableDLQTopic(ctx, topic)
}
