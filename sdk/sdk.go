// Package sdk is what a lifecycled plugin is written against. A plugin is a
// separate executable that lifecycled starts and talks to over gRPC (through
// hashicorp/go-plugin, protocol version 3, mutual TLS). It implements one of
// two interfaces:
//
//   - TenantDeleter: counts and deletes one tenant's data in one store;
//     optionally also a Planner, which says before deleting what it would
//     delete and how, under a fingerprint of the schema or config.
//   - DLQSource: reads dead letters from a broker, commits them once the
//     daemon stored them, and republishes them to their original topic.
//
// and its main function is one call:
//
//	func main() { sdk.ServeTenantDeleter(&myDeleter{}) }
//
// Errors carry a class (retryable or permanent) and survive the gRPC hop; see
// Retryable, Permanent, InvalidConfig and PartialDeletion. Anything a plugin
// returns or logs is scrubbed of passwords and tokens before it leaves the
// process. sdk/plugintest is the conformance kit to run against a plugin;
// sdk/host is the daemon's end of the protocol, which a plugin never needs.
//
// # Module and stability
//
// The sdk is a Go module of its own (github.com/lifecycled/lifecycled/sdk),
// with few dependencies (go-plugin, gRPC, protobuf, hclog) and nothing of
// the daemon, so that a plugin outside this repository depends on it alone:
//
//	go get github.com/lifecycled/lifecycled/sdk@<version or commit>
//
// Releases are tagged sdk/vX.Y.Z. Until v1, a minor release may change the
// Go API (said in the changelog); the wire protocol never changes without a
// new protocol version, and the daemon keeps serving the previous one for at
// least one minor release. From v1 on, the Go API follows semantic
// versioning: request and response structs only gain fields, interfaces
// gain methods only in a new major version.
package sdk

import (
	"context"
	"time"
)

// ProtocolVersion is the newest plugin protocol this SDK speaks; the history
// is in sdk/proto/lifecycled/plugin/v1/plugin.proto. TenantDeleter has only
// gained the optional Plan since protocol 1 (a plugin without it answers
// UNIMPLEMENTED, see Planner), so deleters are served and accepted on 1 and
// 2 as well. A DLQSource built with this SDK speaks 3; the daemon still
// accepts one built for 2 (MinSourceProtocolVersion).
const ProtocolVersion = 3

// MinSourceProtocolVersion is the oldest protocol a DLQSource may speak with
// this SDK. Protocol 1 carried header keys as strings, so a key that was not
// UTF-8 failed a whole Fetch after the source had read the batch, and it had
// no way to hand back a response the daemon did not receive.
const MinSourceProtocolVersion = 2

// ConfigureRequest carries a plugin's config block.
type ConfigureRequest struct {
	// Name of the config block, as reports show it ("postgres:workflows").
	Name string
	// Config is the block's [*.config] table decoded from JSON: strings,
	// float64 numbers, bools, []any and map[string]any. Keys ending in _file
	// were replaced by the daemon with the file's content under the key
	// without the suffix (password_file -> password).
	Config map[string]any
	// TenantIDFormat is the daemon's [daemon] tenant_id_format: "uuid" (the
	// canonical lower-case UUID text) or an anchored regular expression;
	// empty means "uuid". Every tenant id the daemon sends matches it, but a
	// deleter checks anyway (CheckTenantID) and may use it to refuse config
	// under which one tenant's data could be taken for another's
	// (TenantIDMayContain).
	TenantIDFormat string
}

// ConfigureResponse is what Configure reports back.
type ConfigureResponse struct {
	PluginVersion string
	// Warnings are logged by the daemon (an unindexed tenant column, ...).
	Warnings []string
	// Source is what a DLQSource declares about its broker; a
	// TenantDeleter leaves it zero. A DLQSource must set Acks and
	// Positions: Configure fails without them.
	Source SourceTraits
}

// CountRequest asks how much data a tenant has.
type CountRequest struct {
	TenantID string
}

// CountResponse is a count of items (rows, keys, ...).
type CountResponse struct {
	Count int64
	// Breakdown by table, key pattern, ...; optional.
	Breakdown map[string]int64
}

// DeleteRequest asks to delete a tenant's data.
type DeleteRequest struct {
	TenantID string
	// PlanFingerprint is the fingerprint of the plan the daemon checked
	// against the approved one just before this call, as this deleter's
	// Plan returned it; empty when there is none (a daemon built before
	// the field, a deleter that is not a Planner). A Planner recomputes its
	// fingerprint from what it is about to delete with (the schema read at
	// the start of Delete, its config) and, when the two differ, deletes
	// nothing and returns PlanChanged: the store changed between the
	// daemon's check and this call. Empty: no check, as before.
	PlanFingerprint string
}

// DeleteResponse is the result of a successful Delete.
type DeleteResponse struct {
	// DeletedCount is every item the delete removed, cascades and
	// triggers included: the sum of Breakdown when there is one.
	DeletedCount int64
	Breakdown    map[string]int64
	// Proof is what a Verifier checked once its deletes were done (the
	// identities it recorded before them, and what referenced them); nil
	// from a deleter that is not a Verifier. A Delete whose proof finds
	// anything left fails instead of returning it.
	Proof []ProofCheck
}

// Progress receives the number of items deleted so far. Calls may be
// throttled; the last call need not equal the final count.
type Progress func(deletedSoFar int64)

// TenantDeleter deletes one tenant's data from one store.
//
// The tenant id is data, never syntax: a plugin must quote, escape or bind
// it so that glob characters, quotes, "..", spaces or any other bytes in an
// id delete nothing of another tenant. The daemon validates ids against its
// configured format before calling, but a plugin must not rely on that: it
// checks them with CheckTenantID against ConfigureRequest.TenantIDFormat,
// refuses any spelling but the canonical one where its store compares ids
// by value (a numeric key takes "04" for 4), and refuses at Configure a
// layout where an id could run into the text after it (TenantIDMayContain).
type TenantDeleter interface {
	// Configure validates and applies the plugin's config. It is called once
	// after every start of the plugin process, before any other method.
	// Invalid config is reported with InvalidConfig and field problems. It
	// should check that the store is reachable and return a Retryable error
	// when it is not.
	Configure(ctx context.Context, req *ConfigureRequest) (*ConfigureResponse, error)

	// Count returns how many items Delete would delete now. It must not
	// modify anything.
	Count(ctx context.Context, req *CountRequest) (*CountResponse, error)

	// Delete deletes every item of the tenant and returns how many it
	// deleted. It must be idempotent: a second call deletes 0 and succeeds.
	// It should delete in batches so that no transaction or lock is held for
	// long, and report progress after each batch.
	//
	// On failure it returns PartialDeletion(deletedSoFar, err) with err
	// classed Retryable (store unreachable, timeout, throttling: the daemon
	// retries later and only this deleter) or Permanent. When ctx is
	// cancelled it must stop promptly (within one batch) and return ctx.Err()
	// wrapped in PartialDeletion.
	//
	// A Planner checks req.PlanFingerprint before deleting anything (see
	// DeleteRequest and Fingerprints.Check).
	Delete(ctx context.Context, req *DeleteRequest, progress Progress) (*DeleteResponse, error)
}

// Position is where a dead letter sits in its source: the topic (queue,
// table) it was read from and the message's place in it. ID is opaque to
// the daemon; LogPosition builds it for a partitioned log.
type Position struct {
	Topic string
	// ID identifies the message within Topic: the same on every delivery
	// for a source with PositionsStable, one per delivery for
	// PositionsPerDelivery. Ids of one topic compare bytewise in the
	// source's order. At most MaxPositionIDBytes, never empty.
	ID []byte
	// Display is how operators see the position ("p2@1041"); at most
	// MaxPositionDisplayBytes of UTF-8. Empty: the daemon shows ID in hex.
	Display string
}

// Header is one message header. Kafka header keys and values are bytes:
// neither needs to be UTF-8, and both cross the plugin protocol unchanged.
type Header struct {
	Key []byte
	// Value nil is a null value, an empty slice an empty one.
	Value []byte
	// Type is the value's type in the source's own terms, for a source whose
	// headers are typed (SourceTraits.TypedHeaders): the daemon keeps it and
	// sends it back on republish, so that an AMQP int stays an int. Empty
	// for plain bytes.
	Type string
}

// Origin is where a dead letter failed and why, as the source reads it
// from its own conventions (sdk/kafkaconv reads Spring's and Kafka
// Connect's headers; AMQP has x-death).
type Origin struct {
	// Destination is where a retry sends the message: the original topic,
	// or an exchange and routing key in the source's notation. Empty when
	// nothing names one: the message is then never republished. The daemon
	// also refuses one that names a dead-letter topic (the message would
	// only come back).
	Destination string
	// DestinationFrom says what named it ("the header
	// kafka_dlt-original-topic", "x-death", "the source's mapping").
	DestinationFrom string
	// DestinationConfigured: the source's own configuration chose the
	// destination, not the message. What a message names is held to its
	// dead-letter topic's replay targets (whoever can write to a DLQ can
	// write any header); what the operator configured is not.
	DestinationConfigured bool
	// DestinationProblem, when set, says why what named a destination was
	// not usable (too long, ...); Destination is then empty.
	DestinationProblem string
	// ErrorMessage and ErrorClass are the consumer's error: its message and
	// its exception class or reason code, either may be empty.
	ErrorMessage string
	ErrorClass   string
	// Attempts is how often processing failed before the message was
	// dead-lettered, 0 when unknown.
	Attempts int
	// FirstFailedAt is when it first failed, zero when unknown.
	FirstFailedAt time.Time
}

// DeadLetter is one message read from a dead-letter topic or queue.
type DeadLetter struct {
	Position Position
	Key      []byte // nil when the message has no key
	Headers  []Header
	Value    []byte
	// Timestamp is the message's own time, the same on every delivery (the
	// daemon tells a redelivery by it, among others); zero when it has
	// none. Never the time it was read.
	Timestamp time.Time
	// Origin is the source's reading of where and why it failed.
	Origin Origin
	// Redelivered: the broker says this delivery may not be the first
	// (AMQP's redelivered flag). Only a source with PositionsPerDelivery
	// sets it; see SourceTraits.
	Redelivered bool
	// Truncated is set by the SDK (never by a plugin) when this message alone
	// was larger than the RPC limit: its value, and when that was not enough
	// its key and headers, did not cross. OriginalSize is the size it had.
	Truncated    bool
	OriginalSize int64
}

// FetchRequest asks for dead letters.
type FetchRequest struct {
	// Max is the most messages to return.
	Max int
	// Wait is how long to wait for the first message when none is ready.
	Wait time.Duration
}

// FetchResponse is a batch of dead letters, possibly empty.
type FetchResponse struct {
	Messages []DeadLetter
}

// CommitRequest marks positions as stored by the daemon.
type CommitRequest struct {
	Positions []Position
}

// CommitResponse is empty.
type CommitResponse struct{}

// RepublishMessage is a dead letter to send back to its original topic.
// Headers are to be sent exactly as given: the daemon has already added
// x-dlq-id and x-dlq-retry-count, which let it recognise the message if it
// fails again and comes back to a DLQ topic.
type RepublishMessage struct {
	// ID is the daemon's id of the dead letter, for matching results.
	ID      string
	Topic   string
	Key     []byte
	Headers []Header
	Value   []byte
}

// RepublishResult is the outcome for one message.
type RepublishResult struct {
	ID    string
	Acked bool
	// Err is set when Acked is false; its class says whether the failure was
	// the broker's (retryable) or the message's (permanent: too large, topic
	// rejected, ...).
	Err error
}

// RepublishRequest is a batch to republish.
type RepublishRequest struct {
	Messages []RepublishMessage
}

// RepublishResponse has one result per message, in order.
type RepublishResponse struct {
	Results []RepublishResult
}

// DLQSource reads dead letters from a broker and republishes them.
type DLQSource interface {
	// Configure validates and applies the config; see TenantDeleter.Configure.
	Configure(ctx context.Context, req *ConfigureRequest) (*ConfigureResponse, error)

	// Fetch returns up to Max dead letters, waiting up to Wait for the first.
	// Messages not committed are fetched again after a restart of the plugin
	// (at-least-once); the daemon drops duplicates by position.
	//
	// A plugin may return messages of any size: the SDK splits what it
	// returns into responses below the RPC limit, and keeps a response until
	// the daemon acknowledged it (with its next Fetch), handing it back when
	// the daemon did not receive it. A plugin never sees a lost response, so
	// it may advance its reader as soon as Fetch returns.
	Fetch(ctx context.Context, req *FetchRequest) (*FetchResponse, error)

	// Commit records that the daemon durably stored the messages at these
	// positions, so they are not fetched again. Commits come once per
	// stored batch, in fetch order. The daemon does not call Commit again
	// for positions whose Commit failed: a broker with cumulative commits
	// (Kafka offsets) has them covered by the next one; a broker with
	// per-message acknowledgements must be made to redeliver them (close
	// the channel) before Commit returns its error.
	Commit(ctx context.Context, req *CommitRequest) (*CommitResponse, error)

	// Republish sends each message to its topic and returns only after the
	// broker acknowledged it (acks=all) or refused it. A message reported
	// Acked must be durably in the broker. The call as a whole fails only
	// when no message could be attempted (broker unreachable).
	//
	// The SDK splits a request into calls below the RPC limit, and answers a
	// message larger than the limit itself with a permanent error.
	Republish(ctx context.Context, req *RepublishRequest) (*RepublishResponse, error)
}
