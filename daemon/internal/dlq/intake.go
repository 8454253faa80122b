package dlq

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/lifecycled/lifecycled/daemon/internal/periodic"
	"github.com/lifecycled/lifecycled/daemon/internal/retry"
	"github.com/lifecycled/lifecycled/sdk"
)

// IntakeConfig tunes the intake loops.
type IntakeConfig struct {
	BatchSize int           // messages per fetch
	Wait      time.Duration // how long a fetch waits for a first message
}

// Intake runs one pipeline per configured source (see loop): it fetches
// ahead while earlier batches are stored by several workers, and commits
// stored batches in fetch order. A batch that cannot be stored is retried as
// is and every later commit waits for it, so no offset is ever committed
// past a message that is not stored: at-least-once, no loss; redeliveries
// are absorbed by the unique position.
type Intake struct {
	store   Store
	sources Sources
	policy  func() Policy
	cfg     IntakeConfig
	log     hclog.Logger
	metrics *Metrics
	now     func() time.Time
	rnd     func() float64 // jitter source

	mu       sync.Mutex
	running  map[string]*periodic.Loop
	stopping sync.WaitGroup // loops of removed sources, winding down

	// dlqTopics are the topics dead letters were read from, by any source:
	// none of them is an original topic (see Interpret).
	dlqTopics sync.Map
}

// NewIntake returns the intake; Start launches its loops.
func NewIntake(store Store, sources Sources, policy func() Policy, cfg IntakeConfig, log hclog.Logger, m *Metrics) *Intake {
	if cfg.BatchSize <= 0 {
		cfg.BatchSize = 1000
	}
	if cfg.Wait <= 0 {
		cfg.Wait = time.Second
	}
	return &Intake{store: store, sources: sources, policy: policy, cfg: cfg, log: log.Named("dlq.intake"), metrics: m,
		now: time.Now, rnd: rand.Float64, running: map[string]*periodic.Loop{}}
}

// Start launches a loop for every configured source.
func (in *Intake) Start(context.Context) error {
	in.Sync()
	return nil
}

// learnDLQTopics adds the DLQ topics the store knows to those seen; a store
// that does not answer only leaves the set to the topics fetched.
func (in *Intake) learnDLQTopics(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	topics, err := in.store.DLQTopics(ctx)
	if err != nil {
		return
	}
	for _, t := range topics {
		in.dlqTopics.Store(t.Topic, true)
	}
}

// isDLQTopic reports whether dead letters were read from topic.
func (in *Intake) isDLQTopic(topic string) bool {
	_, ok := in.dlqTopics.Load(topic)
	return ok
}

// Sync starts loops for sources added by a reload and stops loops of
// removed ones.
func (in *Intake) Sync() {
	in.mu.Lock()
	defer in.mu.Unlock()
	want := map[string]bool{}
	for _, name := range in.sources.SourceNames() {
		want[name] = true
		if _, ok := in.running[name]; ok {
			continue
		}
		// The pipeline runs until the loop stops, and records its own
		// successes (one per fetch wait).
		l := periodic.NewLoop(periodic.Config{
			Name: "intake", Log: in.log.With("source", name),
			Interval: func() time.Duration { return in.cfg.Wait },
			Pass: func(ctx context.Context) (periodic.Outcome, error) {
				in.loop(ctx, name)
				return periodic.Done, nil
			},
		})
		in.running[name] = l
		_ = l.Start(context.Background())
	}
	for name, l := range in.running {
		if !want[name] {
			delete(in.running, name)
			in.stopInBackground(l)
		}
	}
}

// stopInBackground stops l without waiting; Stop waits for it.
func (in *Intake) stopInBackground(l *periodic.Loop) {
	in.stopping.Add(1)
	go func() {
		defer in.stopping.Done()
		_ = l.Stop(context.Background()) // the pipeline ends soon after its cancel
	}()
}

// Stop ends every loop; a batch fetched but not stored is not committed and
// comes again after the next start.
func (in *Intake) Stop(ctx context.Context) error {
	in.mu.Lock()
	for name, l := range in.running {
		delete(in.running, name)
		in.stopInBackground(l)
	}
	in.mu.Unlock()
	done := make(chan struct{})
	go func() { in.stopping.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

var errorBackoff = retry.Policy{Initial: 200 * time.Millisecond, Multiplier: 2, Max: 30 * time.Second, Jitter: retry.JitterEqual}

// fetched is a batch on its way from the source to the store.
type fetched struct {
	seq       int
	batch     []Incoming
	positions []sdk.Position
}

// storeWorkers is how many batches are stored at once: PostgreSQL uses one
// core per transaction, and a batch waits on its commit's WAL flush.
const storeWorkers = 4

// loop runs one source's intake as a three-stage pipeline: fetch the next
// batch while the previous one is being stored, and commit stored batches
// in order. At most one fetched batch waits for the store, and a batch is
// committed only after it was stored.
func (in *Intake) loop(ctx context.Context, name string) {
	log := in.log.With("source", name)
	toStore := make(chan fetched, 1)
	toCommit := make(chan fetched, storeWorkers*2)
	var stores, commits sync.WaitGroup
	for i := 0; i < storeWorkers; i++ {
		stores.Add(1)
		go func() {
			defer stores.Done()
			in.storeStage(ctx, name, log, toStore, toCommit)
		}()
	}
	commits.Add(1)
	go func() {
		defer commits.Done()
		in.commitStage(ctx, name, log, toCommit)
	}()
	in.fetchStage(ctx, name, log, toStore)
	close(toStore)
	stores.Wait()
	close(toCommit)
	commits.Wait()
}

// backoff pauses after failures: logging the first and every tenth only.
type backoff struct {
	log      hclog.Logger
	failures int
}

func (b *backoff) pause(ctx context.Context, what string, err error) bool {
	if b.failures == 0 || b.failures%10 == 0 {
		b.log.Warn(what, "error", err, "failures", b.failures+1)
	}
	d := errorBackoff.Delay(b.failures)
	b.failures++
	return sleepCtx(ctx, d)
}

func (in *Intake) fetchStage(ctx context.Context, name string, log hclog.Logger, out chan<- fetched) {
	b := &backoff{log: log}
	seq := 0
	in.learnDLQTopics(ctx)
	for ctx.Err() == nil {
		src, err := in.sources.Source(name)
		if err != nil || !in.sources.Running(name) {
			if err == nil {
				err = errors.New("source plugin is not running")
			}
			if !b.pause(ctx, "dead-letter source unavailable; intake paused", err) {
				return
			}
			continue
		}
		resp, err := src.Fetch(ctx, &sdk.FetchRequest{Max: in.cfg.BatchSize, Wait: in.cfg.Wait})
		if err != nil {
			if ctx.Err() != nil || !b.pause(ctx, "fetch dead letters", err) {
				return
			}
			continue
		}
		b.failures = 0
		if len(resp.Messages) == 0 {
			in.metrics.markSuccess(jobIntake, in.cfg.Wait)
			continue
		}
		f := fetched{seq: seq, batch: make([]Incoming, len(resp.Messages)), positions: make([]sdk.Position, len(resp.Messages))}
		seq++
		now := in.now()
		for _, m := range resp.Messages {
			in.dlqTopics.Store(m.Position.Topic, true)
		}
		policy := in.policy()
		for i, m := range resp.Messages {
			f.batch[i] = Interpret(name, m, now, in.isDLQTopic)
			f.batch[i].targetRefused = refuseOutsideTargets(&f.batch[i], ReplayTargetsOf(policy, f.batch[i].Position.Topic))
			f.positions[i] = m.Position
		}
		select {
		case out <- f:
		case <-ctx.Done():
			return // not stored, not committed: fetched again after the restart
		}
	}
}

// storeStage stores each batch, however long it takes: moving on would let a
// later commit cover these offsets. A batch that keeps failing is stored one
// message at a time, so that one message the store refuses (whatever it
// holds) cannot hold up the source: it is stored without the JSON copy of
// its payload, and if that is refused too, as received, without the
// interpretation the store refused, and the reason.
func (in *Intake) storeStage(ctx context.Context, name string, log hclog.Logger, batches <-chan fetched, out chan<- fetched) {
	b := &backoff{log: log}
	for f := range batches {
		for {
			res, returnsOn, err := in.ingestByTopic(ctx, f.batch)
			if err != nil && b.failures >= oneByOneAfter && ctx.Err() == nil {
				res, err = in.storeOneByOne(ctx, log, f.batch)
			}
			if err == nil {
				in.metrics.ingested.WithLabelValues(name).Add(float64(res.Inserted))
				in.metrics.duplicates.WithLabelValues(name).Add(float64(res.Duplicates))
				in.metrics.returned.WithLabelValues(name).Add(float64(res.Feedback))
				in.metrics.dead.Add(float64(res.Dead))
				for _, m := range f.batch {
					if m.targetRefused {
						in.metrics.targetRefused.WithLabelValues(m.Position.Topic).Inc()
					}
				}
				for _, topic := range returnsOn {
					in.autoPause(ctx, topic)
				}
				break
			}
			if ctx.Err() != nil || !b.pause(ctx, "store dead letters (batch kept, will retry)", err) {
				return
			}
		}
		b.failures = 0
		select {
		case out <- f:
		case <-ctx.Done():
			return
		}
	}
}

// commitStage commits stored batches in the order they were fetched: a
// batch stored early waits for the ones before it, so a commit never covers
// a batch that is not stored, and a partition's committed offset never moves
// backwards.
func (in *Intake) commitStage(ctx context.Context, name string, log hclog.Logger, stored <-chan fetched) {
	next := 0
	waiting := map[int][]sdk.Position{}
	for f := range stored {
		waiting[f.seq] = f.positions
		for {
			positions, ok := waiting[next]
			if !ok {
				break
			}
			delete(waiting, next)
			next++
			in.commit(ctx, name, log, positions)
		}
	}
}

func (in *Intake) commit(ctx context.Context, name string, log hclog.Logger, positions []sdk.Position) {
	src, err := in.sources.Source(name)
	if err == nil {
		_, err = src.Commit(ctx, &sdk.CommitRequest{Positions: positions})
	}
	if err != nil && ctx.Err() == nil {
		// Stored but not committed: a later commit covers these offsets,
		// and a redelivery meanwhile is stored once.
		log.Warn("commit offsets", "error", err, "messages", len(positions))
	}
	in.metrics.markSuccess(jobIntake, in.cfg.Wait)
}

// oneByOneAfter is how many times a batch fails whole before it is stored
// one message at a time.
const oneByOneAfter = 3

// storeOneByOne stores each message of a batch alone. A message the store
// refuses is stored again without the JSON copy of its payload (PostgreSQL's
// jsonb refuses some JSON that Go accepts, such as numbers out of its
// range), then without its interpretation (see Degrade). It fails as soon
// as the store refuses a degraded message too: the store itself is
// failing, and the batch is tried again later.
func (in *Intake) storeOneByOne(ctx context.Context, log hclog.Logger, batch []Incoming) (IngestResult, error) {
	var total IngestResult
	for _, m := range batch {
		res, err := in.store.IngestDLQ(ctx, []Incoming{m}, in.ingestOptions(m.Position.Topic))
		if err != nil && !m.NoJSON {
			plain := m
			plain.NoJSON = true
			if res, err = in.store.IngestDLQ(ctx, []Incoming{plain}, in.ingestOptions(m.Position.Topic)); err == nil {
				log.Warn("stored a dead letter without the JSON copy of its payload, which the state store refused", "position", m.Position.String())
			}
		}
		if err != nil {
			if res, err = in.store.IngestDLQ(ctx, []Incoming{Degrade(m, err)}, in.ingestOptions(m.Position.Topic)); err != nil {
				return total, err
			}
			log.Warn("stored a dead letter without its interpretation", "position", m.Position.String(), "error", err)
		}
		total.Inserted += res.Inserted
		total.Duplicates += res.Duplicates
		total.Feedback += res.Feedback
		total.Dead += res.Dead
	}
	return total, nil
}

// Degrade is a message as received, without what was made of it: no
// original topic (nothing it named can be trusted: it is never republished
// automatically), no producer timestamp, no returning-replay id, no JSON
// copy of its payload, and the store's refusal as its last error. Its
// position and digest stay, so a redelivery is still recognised.
func Degrade(m Incoming, storeErr error) Incoming {
	reason := sanitize(NoOriginalTopicPrefix+"stored as received: the state store refused what was read from its headers: "+storeErr.Error(), maxErrorLength)
	return Incoming{
		Position: m.Position, Digest: m.Digest, ErrorMessage: UnknownError,
		Key: m.Key, Headers: m.Headers, Payload: m.Payload, NoJSON: true,
		Truncated: m.Truncated, Dead: m.Dead, LastError: reason,
	}
}

// ingestOptions is the policy intake applies to the messages of a DLQ topic.
func (in *Intake) ingestOptions(topic string) IngestOptions {
	pol := in.policy().For(topic)
	now := in.now()
	opts := IngestOptions{Now: now, MaxRetries: pol.MaxRetries}
	if pol.AutoRetry {
		// One draw per message: with full jitter a shared draw gave a whole
		// batch the same, possibly near-zero, first retry.
		opts.FirstRetryAt = func() *time.Time {
			t := now.Add(pol.Backoff.DelayRand(0, in.rnd))
			return &t
		}
		opts.FeedbackRetryAt = func(attempt int) *time.Time {
			t := now.Add(pol.Backoff.DelayRand(attempt, in.rnd))
			return &t
		}
	}
	return opts
}

// ingestByTopic stores a batch with each DLQ topic's policy: the whole
// batch in one transaction when every topic has the same policy (no
// [[dlq.topic]] blocks), else one per topic, in the batch's order of first
// appearance. It returns the topics on which returning replays were
// counted, for the auto-pause.
func (in *Intake) ingestByTopic(ctx context.Context, batch []Incoming) (IngestResult, []string, error) {
	var order []string
	groups := map[string][]Incoming{}
	for _, m := range batch {
		t := m.Position.Topic
		if _, ok := groups[t]; !ok {
			order = append(order, t)
		}
		groups[t] = append(groups[t], m)
	}
	if in.policy().ForTopic == nil {
		res, err := in.store.IngestDLQ(ctx, batch, in.ingestOptions(""))
		if err != nil || res.Feedback == 0 {
			return res, nil, err
		}
		return res, order, nil
	}
	var total IngestResult
	var returnsOn []string
	for _, t := range order {
		res, err := in.store.IngestDLQ(ctx, groups[t], in.ingestOptions(t))
		if err != nil {
			// The groups stored already are found again as duplicates when
			// the batch is tried again.
			return total, returnsOn, err
		}
		total.Inserted += res.Inserted
		total.Duplicates += res.Duplicates
		total.Feedback += res.Feedback
		total.Dead += res.Dead
		if res.Feedback > 0 {
			returnsOn = append(returnsOn, t)
		}
	}
	return total, returnsOn, nil
}
