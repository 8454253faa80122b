package dlq

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/lifecycled/lifecycled/daemon/internal/derrors"
)

// TopicPause says that the automatic retry loop leaves a DLQ topic alone:
// it claims none of its messages, so none spends an attempt, until an
// operator resumes it. It is stored, so it survives a restart and holds for
// every daemon sharing the store.
type TopicPause struct {
	Topic    string
	PausedAt time.Time
	Reason   string
	// Auto: the loop paused the topic itself, because too many of its
	// replays came back (Policy.AutoPauseReturns within AutoPauseWindow).
	Auto bool
	UID  *uint32 // the operator's, when paused by hand
}

// PauseStore keeps paused topics and counts returning replays.
type PauseStore interface {
	// PauseDLQTopic pauses p.Topic, unless it is paused already: it returns
	// the pause in force and whether it is the one just made.
	PauseDLQTopic(ctx context.Context, p TopicPause) (TopicPause, bool, error)
	// ResumeDLQTopic ends the pause of a topic at now; false when it was
	// not paused.
	ResumeDLQTopic(ctx context.Context, topic string, now time.Time) (bool, error)
	// DLQTopicPauses lists the paused topics, by topic.
	DLQTopicPauses(ctx context.Context) ([]TopicPause, error)
	// CountReturnsDLQ counts the returning replays (history events of kind
	// returned) of a DLQ topic's messages since a time and since the
	// topic's last resume, so that the returns behind one pause do not
	// cause the next.
	CountReturnsDLQ(ctx context.Context, topic string, since time.Time) (int64, error)
}

// For is the policy of one DLQ topic: the policy with the first matching
// [[dlq.topic]] block applied (ForTopic), or the policy itself.
func (p Policy) For(topic string) Policy {
	if p.ForTopic == nil {
		return p
	}
	q := p.ForTopic(topic)
	q.ForTopic = nil
	return q
}

// Pause stops the automatic retries of a DLQ topic until Resume. Pausing a
// paused topic changes nothing and answers the pause in force (created
// false). uid is the caller's.
func (s *Service) Pause(ctx context.Context, topic, reason string, uid uint32) (TopicPause, bool, error) {
	if err := ValidTopic(topic); err != nil {
		return TopicPause{}, false, err
	}
	if reason == "" {
		reason = "paused by an operator"
	}
	if len(reason) > 1024 {
		return TopicPause{}, false, fmt.Errorf("%w: reason is %d bytes long (at most 1024)", derrors.ErrInvalid, len(reason))
	}
	p, created, err := s.store.PauseDLQTopic(ctx, TopicPause{Topic: topic, PausedAt: s.now(), Reason: reason, UID: &uid})
	if err == nil && created {
		s.log.Info("paused automatic retries of a DLQ topic", "topic", topic, "uid", uid)
	}
	return p, created, err
}

// Resume lets the automatic loop retry a paused topic again; it returns
// derrors.ErrNotFound when the topic is not paused.
func (s *Service) Resume(ctx context.Context, topic string, uid uint32) error {
	if err := ValidTopic(topic); err != nil {
		return err
	}
	ok, err := s.store.ResumeDLQTopic(ctx, topic, s.now())
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("%w: topic %s is not paused", derrors.ErrNotFound, topic)
	}
	s.log.Info("resumed automatic retries of a DLQ topic", "topic", topic, "uid", uid)
	return nil
}

// Pauses lists the paused topics.
func (s *Service) Pauses(ctx context.Context) ([]TopicPause, error) {
	return s.store.DLQTopicPauses(ctx)
}

// disabledTopics are the known DLQ topics whose policy turns automatic
// retries off ([[dlq.topic]] enabled = false): the loop claims none of
// their messages.
func (s *Service) disabledTopics(ctx context.Context, pol Policy) ([]string, error) {
	if pol.ForTopic == nil {
		return nil, nil
	}
	topics, err := s.store.DLQTopics(ctx)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, t := range topics {
		if !pol.For(t.Topic).AutoRetry {
			out = append(out, t.Topic)
		}
	}
	return out, nil
}

// withPauses adds each topic's pause to topics (index: position by topic),
// and a summary with no messages for a paused topic that has none.
func (s *Service) withPauses(ctx context.Context, topics []TopicSummary, index map[string]int) ([]TopicSummary, error) {
	pauses, err := s.store.DLQTopicPauses(ctx)
	if err != nil {
		return nil, err
	}
	for _, p := range pauses {
		p := p
		i, ok := index[p.Topic]
		if !ok {
			counts := map[Status]int64{}
			for _, st := range Statuses {
				counts[st] = 0
			}
			topics = append(topics, TopicSummary{Topic: p.Topic, Counts: counts})
			i = len(topics) - 1
			index[p.Topic] = i
		}
		topics[i].Paused = &p
	}
	sort.SliceStable(topics, func(i, j int) bool { return topics[i].Topic < topics[j].Topic })
	return topics, nil
}
