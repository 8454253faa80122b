package sdk

// Headers the daemon adds to what it hands a source's Republish
// (docs/plugin-protocol.md, "retries and replays"): a retry carries
// HeaderDLQID and HeaderRetryCount, a replay HeaderReplayOf and
// HeaderReplayID. A source tells them apart by these, and a send that
// fails again and comes back as a dead letter is matched to its record.
const (
	HeaderDLQID      = "x-dlq-id"          // the dead letter's id (a retry)
	HeaderRetryCount = "x-dlq-retry-count" // this attempt, from 1 (a retry)
	HeaderReplayOf   = "x-dlq-replay-of"   // the dead letter replayed (a replay)
	HeaderReplayID   = "x-dlq-replay-id"   // this replay's id (a replay)
)
