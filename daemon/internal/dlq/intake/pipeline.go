// Package intake takes dead letters in: one pipeline per configured source
// fetches from the source plugin, stores each batch in the state store and
// commits the source's positions only once what they cover is stored.
package intake

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/lifecycled/lifecycled/daemon/internal/dlq"
	"github.com/lifecycled/lifecycled/daemon/internal/periodic"
	"github.com/lifecycled/lifecycled/daemon/internal/retry"
	"github.com/lifecycled/lifecycled/sdk"
)

// Config tunes the intake loops.
type Config struct {
	BatchSize int           // messages per fetch
	Wait      time.Duration // how long a fetch waits for a first message
	// Now and Jitter default to the clock and math/rand; tests set them to
	// check retry schedules exactly.
	Now    func() time.Time
	Jitter func() float64
}

// Pipeline runs one pipeline per configured source (see loop): it fetches
// ahead while earlier batches are stored by several workers, and commits
// stored batches in fetch order. A batch that cannot be stored is retried as
// is and every later commit waits for it, so no offset is ever committed
// past a message that is not stored: at-least-once, no loss; redeliveries
// are absorbed by the unique position.
type Pipeline struct {
	store   dlq.Store
	sources dlq.Sources
	policy  func() dlq.Policy
	cfg     Config
	log     hclog.Logger
	metrics *Metrics

	mu       sync.Mutex
	running  map[string]*periodic.Loop
	stopping sync.WaitGroup // loops of removed sources, winding down

	// dlqTopics are the topics dead letters were read from, by any source:
	// none of them is an original topic (see dlq.Interpret).
	dlqTopics sync.Map
}

// New returns the intake; Start launches its loops.
func New(store dlq.Store, sources dlq.Sources, policy func() dlq.Policy, cfg Config, log hclog.Logger, m *Metrics) *Pipeline {
	if cfg.BatchSize <= 0 {
		cfg.BatchSize = 1000
	}
	if cfg.Wait <= 0 {
		cfg.Wait = time.Second
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Jitter == nil {
		cfg.Jitter = rand.Float64
	}
	return &Pipeline{store: store, sources: sources, policy: policy, cfg: cfg, log: log.Named("dlq.intake"), metrics: m,
		running: map[string]*periodic.Loop{}}
}

// Start launches a loop for every configured source.
func (in *Pipeline) Start(context.Context) error {
	in.Sync()
	return nil
}

// learnDLQTopics adds the DLQ topics the store knows to those seen; a store
// that does not answer only leaves the set to the topics fetched.
func (in *Pipeline) learnDLQTopics(ctx context.Context) {
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
func (in *Pipeline) isDLQTopic(topic string) bool {
	_, ok := in.dlqTopics.Load(topic)
	return ok
}

// Sync starts loops for sources added by a reload and stops loops of
// removed ones.
func (in *Pipeline) Sync() {
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
func (in *Pipeline) stopInBackground(l *periodic.Loop) {
	in.stopping.Add(1)
	go func() {
		defer in.stopping.Done()
		_ = l.Stop(context.Background()) // the pipeline ends soon after its cancel
	}()
}

// Stop ends every loop; a batch fetched but not stored is not committed and
// comes again after the next start.
func (in *Pipeline) Stop(ctx context.Context) error {
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
	batch     []dlq.Incoming
	positions []sdk.Position
	// traits are the source's when it was fetched.
	traits sdk.SourceTraits
	// targetRefused has the DLQ topic of each message whose header named a
	// topic outside its replay targets.
	targetRefused []string
}

// storeWorkers is how many batches are stored at once: PostgreSQL uses one
// core per transaction, and a batch waits on its commit's WAL flush.
const storeWorkers = 4

// loop runs one source's intake as a three-stage pipeline: fetch the next
// batch while the previous one is being stored, and commit stored batches
// in order. At most one fetched batch waits for the store, and a batch is
// committed only after it was stored.
func (in *Pipeline) loop(ctx context.Context, name string) {
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

func (in *Pipeline) fetchStage(ctx context.Context, name string, log hclog.Logger, out chan<- fetched) {
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
		traits := in.sources.Traits(name)
		if err := traits.Check(); err != nil {
			if !b.pause(ctx, "dead-letter source declares no traits; intake paused", err) {
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
			in.metrics.passed(in.cfg.Wait)
			continue
		}
		f := fetched{seq: seq, batch: make([]dlq.Incoming, len(resp.Messages)), positions: make([]sdk.Position, len(resp.Messages)),
			traits: traits}
		seq++
		now := in.cfg.Now()
		for _, m := range resp.Messages {
			in.dlqTopics.Store(m.Position.Topic, true)
		}
		policy := in.policy()
		for i, m := range resp.Messages {
			f.batch[i] = dlq.Interpret(name, traits, m, now, in.isDLQTopic)
			if dlq.RefuseOutsideTargets(&f.batch[i], dlq.ReplayTargetsOf(policy, f.batch[i].Position.Topic)) {
				f.targetRefused = append(f.targetRefused, f.batch[i].Position.Topic)
			}
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
func (in *Pipeline) storeStage(ctx context.Context, name string, log hclog.Logger, batches <-chan fetched, out chan<- fetched) {
	b := &backoff{log: log}
	for f := range batches {
		for {
			res, returnsOn, err := in.ingestByTopic(ctx, f.batch)
			if err != nil && b.failures >= oneByOneAfter && ctx.Err() == nil {
				res, err = in.storeOneByOne(ctx, log, f.batch)
			}
			if err == nil {
				in.metrics.stored(name, res, f.targetRefused)
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
func (in *Pipeline) commitStage(ctx context.Context, name string, log hclog.Logger, stored <-chan fetched) {
	next := 0
	waiting := map[int]fetched{}
	for f := range stored {
		waiting[f.seq] = f
		for {
			f, ok := waiting[next]
			if !ok {
				break
			}
			delete(waiting, next)
			next++
			in.commit(ctx, name, log, f)
		}
	}
}

// commit commits a stored batch at its source. It is not committed again
// when that fails: a source with cumulative commits (Kafka offsets) has it
// covered by the next batch's; one with per-message acknowledgements makes
// its broker deliver the messages again (docs/plugin-protocol.md), and a
// redelivery is stored once (by its stable position, or matched to the
// unconfirmed delivery). A per-delivery source's deliveries are marked
// committing first: if the outcome is never known (the daemon stops, the
// source cannot tell), a redelivery of them is stored again rather than
// taken for one that may have been acknowledged.
func (in *Pipeline) commit(ctx context.Context, name string, log hclog.Logger, f fetched) {
	perDelivery := f.traits.Positions == sdk.PositionsPerDelivery
	var stored []dlq.Position
	if perDelivery {
		stored = make([]dlq.Position, len(f.batch))
		for i, m := range f.batch {
			stored[i] = m.Position
		}
		if err := in.store.MarkDLQDeliveries(ctx, name, stored, dlq.DeliveriesCommitting, in.cfg.Now()); err != nil && ctx.Err() == nil {
			log.Warn("mark deliveries committing; committing them anyway", "error", err, "messages", len(stored))
		}
	}
	src, err := in.sources.Source(name)
	if err == nil && !in.sources.Running(name) {
		// The process that handed them out is gone and took its connection
		// with it: none of them was acknowledged, as no Commit was sent.
		err = sdk.NotCommitted(errors.New("the source is not running"))
	} else if err == nil {
		_, err = src.Commit(ctx, &sdk.CommitRequest{Positions: f.positions})
	} else {
		err = sdk.NotCommitted(err)
	}
	// What became of the Commit is recorded even while the daemon stops.
	settle := func(state dlq.DeliveryState) {
		mctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		if err := in.store.MarkDLQDeliveries(mctx, name, stored, state, in.cfg.Now()); err != nil {
			log.Warn("record what became of acknowledged deliveries", "error", err, "messages", len(stored))
		}
	}
	switch {
	case err == nil && perDelivery:
		settle(dlq.DeliveriesConfirmed)
	case err == nil:
	case perDelivery && sdk.CodeOf(err) == sdk.CodeNotCommitted:
		settle(dlq.DeliveriesNotCommitted)
		log.Warn("acknowledge stored dead letters at the source: none was; the broker delivers them again, and each is then stored once",
			"error", err, "messages", len(f.positions))
	case perDelivery:
		log.Warn("acknowledge stored dead letters at the source: the outcome is not known; if the broker delivers them again, each is stored again rather than risk taking another identical message for it",
			"error", err, "messages", len(f.positions))
	case f.traits.Acks == sdk.AcksPerMessage:
		log.Warn("acknowledge stored dead letters at the source; the broker delivers them again, and each is then stored once",
			"error", err, "messages", len(f.positions))
	default:
		log.Warn("commit stored dead letters at the source; a later commit covers them, and if they are delivered again each is stored once",
			"error", err, "messages", len(f.positions))
	}
	in.metrics.passed(in.cfg.Wait)
}
