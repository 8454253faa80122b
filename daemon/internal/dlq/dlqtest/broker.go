package dlqtest

import (
	"context"
	"sync"
	"time"

	"github.com/lifecycled/lifecycled/daemon/internal/derrors"
	"github.com/lifecycled/lifecycled/sdk"
)

// Broker stands in for a DLQ source plugin: the boundary the manager talks
// to over gRPC. It holds dead letters to hand out, records commits and
// republishes, and can refuse messages or be unreachable.
type Broker struct {
	mu          sync.Mutex // Set and Read hold it; so do the sdk.DLQSource methods
	Queue       []sdk.DeadLetter
	Committed   []sdk.Position
	Republished []sdk.RepublishMessage
	Refuse      map[string]error // per-message error by dlq id
	RefuseAny   error            // refuses every message with this error
	Down        error            // the whole Republish/Fetch call fails
	Running     bool
	// Stored reports whether a position is in the state store; a commit of
	// a position that is not is recorded in Early.
	Stored func(sdk.Position) bool
	Early  []sdk.Position
	// During runs while a Republish is in flight, before the broker answers.
	During func()
}

// NewBroker is a running broker with nothing to hand out.
func NewBroker() *Broker { return &Broker{Refuse: map[string]error{}, Running: true} }

func (b *Broker) Configure(context.Context, *sdk.ConfigureRequest) (*sdk.ConfigureResponse, error) {
	return &sdk.ConfigureResponse{}, nil
}

func (b *Broker) Fetch(ctx context.Context, req *sdk.FetchRequest) (*sdk.FetchResponse, error) {
	b.mu.Lock()
	if down := b.Down; down != nil {
		b.mu.Unlock()
		return nil, down
	}
	n := min(req.Max, len(b.Queue))
	out := append([]sdk.DeadLetter(nil), b.Queue[:n]...)
	b.Queue = b.Queue[n:]
	b.mu.Unlock()
	if n == 0 {
		select {
		case <-time.After(min(req.Wait, 20*time.Millisecond)):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return &sdk.FetchResponse{Messages: out}, nil
}

func (b *Broker) Commit(_ context.Context, req *sdk.CommitRequest) (*sdk.CommitResponse, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, p := range req.Positions {
		if b.Stored != nil && !b.Stored(p) {
			b.Early = append(b.Early, p)
		}
	}
	b.Committed = append(b.Committed, req.Positions...)
	return &sdk.CommitResponse{}, nil
}

func (b *Broker) Republish(_ context.Context, req *sdk.RepublishRequest) (*sdk.RepublishResponse, error) {
	b.mu.Lock()
	during := b.During
	b.mu.Unlock()
	if during != nil {
		during()
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.Down != nil {
		return nil, b.Down
	}
	resp := &sdk.RepublishResponse{Results: make([]sdk.RepublishResult, len(req.Messages))}
	for i, m := range req.Messages {
		if err := b.Refuse[m.ID]; err != nil || b.RefuseAny != nil {
			if err == nil {
				err = b.RefuseAny
			}
			resp.Results[i] = sdk.RepublishResult{ID: m.ID, Err: err}
			continue
		}
		b.Republished = append(b.Republished, m)
		resp.Results[i] = sdk.RepublishResult{ID: m.ID, Acked: true}
	}
	return resp, nil
}

// Set changes b under its lock.
func (b *Broker) Set(fn func(b *Broker)) {
	b.mu.Lock()
	defer b.mu.Unlock()
	fn(b)
}

// CommittedCount is how many positions were committed.
func (b *Broker) CommittedCount() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.Committed)
}

// Sent is a copy of the messages b acknowledged, in order.
func (b *Broker) Sent() []sdk.RepublishMessage {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]sdk.RepublishMessage(nil), b.Republished...)
}

// IsRunning reports whether the source plugin is running.
func (b *Broker) IsRunning() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.Running
}

// RepublishedIDs are the ids of the messages b acknowledged, in order.
func (b *Broker) RepublishedIDs() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	ids := make([]string, len(b.Republished))
	for i, m := range b.Republished {
		ids[i] = m.ID
	}
	return ids
}

// Sources is the plugin host's view of one source named "kafka".
type Sources struct{ B *Broker }

func (s Sources) SourceNames() []string { return []string{"kafka"} }
func (s Sources) Source(name string) (sdk.DLQSource, error) {
	if name != "kafka" {
		return nil, derrors.ErrNotFound
	}
	return s.B, nil
}
func (s Sources) Running(name string) bool { return name == "kafka" && s.B.IsRunning() }

// Traits are Kafka's: the broker's positions are offsets.
func (s Sources) Traits(name string) sdk.SourceTraits {
	if !s.Running(name) {
		return sdk.SourceTraits{}
	}
	return sdk.Protocol2Traits
}
