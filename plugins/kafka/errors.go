package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/lifecycled/lifecycled/sdk"
)

// errClass is what a broker error means for a message being republished.
type errClass int

const (
	// classRetryable: the broker or the network is in trouble; not the
	// message's fault, so its attempt is not counted.
	classRetryable errClass = iota
	// classMetadata: the client's metadata is stale or a partition has no
	// leader (a topic created a moment ago, a leader election): worth
	// retrying at once with fresh metadata, for a bounded time.
	classMetadata
	// classTooLarge: the broker refuses the size of the message or of the
	// batch it was in; the message is tried alone before it fails.
	classTooLarge
	// classPermanent: the message itself is refused (invalid topic, not
	// authorised, corrupt record); counted as an attempt.
	classPermanent
)

func (c errClass) String() string {
	return [...]string{"retryable", "metadata", "too large", "permanent"}[c]
}

// metadataErrors are the produce errors fresh metadata can cure.
// UNKNOWN_TOPIC_ID is among them because franz-go keeps the id of a topic
// it has seen: a topic deleted and created again fails with it until the
// client forgets the topic (see writeTopic).
var metadataErrors = []*kerr.Error{
	kerr.UnknownTopicOrPartition,
	kerr.UnknownTopicID,
	kerr.LeaderNotAvailable,
	kerr.NotLeaderForPartition,
	kerr.BrokerNotAvailable,
	kerr.ReplicaNotAvailable,
	kerr.FencedLeaderEpoch,
	kerr.UnknownLeaderEpoch,
}

// classOf sorts an error from a franz-go call into an errClass. franz-go
// wraps the broker's error (a *kerr.Error) in its own where it adds context
// (a record that timed out says what it last failed with), so the broker's
// error is looked for inside.
func classOf(err error) errClass {
	var ke *kerr.Error
	if !errors.As(err, &ke) {
		// Network errors, timeouts, a cancelled call, a closed client.
		return classRetryable
	}
	for _, m := range metadataErrors {
		if ke == m {
			return classMetadata
		}
	}
	switch {
	case ke == kerr.MessageTooLarge || ke == kerr.RecordListTooLarge:
		return classTooLarge
	case ke.Retriable:
		return classRetryable
	default:
		return classPermanent
	}
}

// classify turns an error of a call that is not retried here (a commit, a
// metadata listing) into an sdk error.
func classify(err error) error {
	if err == nil || errors.Is(err, context.Canceled) {
		return err
	}
	if classOf(err) == classPermanent {
		return sdk.Permanent(err)
	}
	return sdk.Retryable(err, 0)
}

// republishError is the error a message's republish ends with, after the
// metadata retries (waited) are over. A topic the broker still does not
// know is the message's problem (the topic is wrong or was deleted), so it
// is permanent and counts; a partition still without a leader is the
// broker's, so it stays retryable.
func republishError(topic string, err error, waited time.Duration) error {
	switch classOf(err) {
	case classMetadata:
		if errors.Is(err, kerr.UnknownTopicOrPartition) {
			return sdk.Permanent(fmt.Errorf("republish to %s: the broker does not know the topic (still %w after %s of metadata refreshes)",
				topic, err, waited.Round(time.Millisecond)))
		}
		return sdk.Retryable(fmt.Errorf("republish to %s: %w (after %s of metadata refreshes)", topic, err, waited.Round(time.Millisecond)), 0)
	case classTooLarge:
		return sdk.Permanent(fmt.Errorf("republish to %s: message too large for the broker, even alone: %w", topic, err))
	case classPermanent:
		return sdk.Permanent(fmt.Errorf("republish to %s: %w", topic, err))
	default:
		return sdk.Retryable(fmt.Errorf("republish to %s: %w", topic, err), 0)
	}
}
