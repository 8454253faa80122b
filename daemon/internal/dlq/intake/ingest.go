package intake

import (
	"context"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/lifecycled/lifecycled/daemon/internal/dlq"
)

// oneByOneAfter is how many times a batch fails whole before it is stored
// one message at a time.
const oneByOneAfter = 3

// storeOneByOne stores each message of a batch alone. A message the store
// refuses is stored again without the JSON copy of its payload (PostgreSQL's
// jsonb refuses some JSON that Go accepts, such as numbers out of its
// range), then without its interpretation (see dlq.Degrade). It fails as soon
// as the store refuses a degraded message too: the store itself is
// failing, and the batch is tried again later.
func (in *Pipeline) storeOneByOne(ctx context.Context, log hclog.Logger, batch []dlq.Incoming) (dlq.IngestResult, error) {
	var total dlq.IngestResult
	for _, m := range batch {
		res, err := in.store.IngestDLQ(ctx, []dlq.Incoming{m}, in.ingestOptions(m.Position.Topic))
		if err != nil && !m.NoJSON {
			plain := m
			plain.NoJSON = true
			if res, err = in.store.IngestDLQ(ctx, []dlq.Incoming{plain}, in.ingestOptions(m.Position.Topic)); err == nil {
				log.Warn("stored a dead letter without the JSON copy of its payload, which the state store refused", "position", m.Position.String())
			}
		}
		if err != nil {
			if res, err = in.store.IngestDLQ(ctx, []dlq.Incoming{dlq.Degrade(m, err)}, in.ingestOptions(m.Position.Topic)); err != nil {
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

// ingestOptions is the policy intake applies to the messages of a DLQ topic.
func (in *Pipeline) ingestOptions(topic string) dlq.IngestOptions {
	pol := in.policy().For(topic)
	now := in.cfg.Now()
	opts := dlq.IngestOptions{Now: now, MaxRetries: pol.MaxRetries}
	if pol.AutoRetry {
		// One draw per message: with full jitter a shared draw gave a whole
		// batch the same, possibly near-zero, first retry.
		opts.FirstRetryAt = func() *time.Time {
			t := now.Add(pol.Backoff.DelayRand(0, in.cfg.Jitter))
			return &t
		}
		opts.FeedbackRetryAt = func(attempt int) *time.Time {
			t := now.Add(pol.Backoff.DelayRand(attempt, in.cfg.Jitter))
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
func (in *Pipeline) ingestByTopic(ctx context.Context, batch []dlq.Incoming) (dlq.IngestResult, []string, error) {
	var order []string
	groups := map[string][]dlq.Incoming{}
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
	var total dlq.IngestResult
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
