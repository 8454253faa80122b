package plugintest

import (
	"bytes"
	"fmt"
	"sort"

	"github.com/lifecycled/lifecycled/sdk"
)

// How the source kit compares headers: as a list or as a set, by the
// source's traits, without those a broker adds.

// headerFidelity is what a source keeps of a message's headers, as its
// SourceTraits declare it.
type headerFidelity int

const (
	// headersExact: every header, keys and values as bytes, in the order
	// the broker holds them (Kafka): SourceTraits.HeaderOrderKept.
	headersExact headerFidelity = iota
	// headersUnordered: every header, keys and values as bytes, in an
	// order of the source's own: a broker whose client hands headers over
	// as a map (AMQP's table in amqp091-go).
	headersUnordered
)

// differ says how got differs from want under fidelity f ("" when it
// does not).
func (f headerFidelity) differ(got, want []sdk.Header) string {
	if sameHeaders(got, want) {
		return ""
	}
	if !sameHeaders(sortedHeaders(got), sortedHeaders(want)) {
		return fmt.Sprintf("headers %q, want %q: keep every header, its key and its value as bytes", got, want)
	}
	if f == headersUnordered {
		return ""
	}
	return fmt.Sprintf("headers %q, want %q in this order: keep the broker's order, or, when the broker's client hands headers over as a map, "+
		"declare SourceTraits.HeaderOrderKept = false", got, want)
}

// dlqID is the value of the x-dlq-id header a republished message carries:
// the last header, or under headersUnordered any.
func dlqID(hs []sdk.Header, f headerFidelity) (string, bool) {
	for i := len(hs) - 1; i >= 0; i-- {
		if string(hs[i].Key) == sdk.HeaderDLQID {
			return string(hs[i].Value), true
		}
		if f == headersExact {
			break
		}
	}
	return "", false
}

// sameHeaders compares keys, values and types in order.
func sameHeaders(a, b []sdk.Header) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !bytes.Equal(a[i].Key, b[i].Key) || !bytes.Equal(a[i].Value, b[i].Value) || a[i].Type != b[i].Type {
			return false
		}
	}
	return true
}

func hasHeader(hs []sdk.Header, h sdk.Header) bool {
	for _, x := range hs {
		if bytes.Equal(x.Key, h.Key) && bytes.Equal(x.Value, h.Value) && x.Type == h.Type {
			return true
		}
	}
	return false
}

func sortedHeaders(hs []sdk.Header) []sdk.Header {
	out := append([]sdk.Header(nil), hs...)
	sort.SliceStable(out, func(i, j int) bool {
		if c := bytes.Compare(out[i].Key, out[j].Key); c != 0 {
			return c < 0
		}
		return bytes.Compare(out[i].Value, out[j].Value) < 0
	})
	return out
}

// withoutAdded is hs without the headers the fixture's broker adds.
func withoutAdded(f SourceFixture, hs []sdk.Header) []sdk.Header {
	bf, ok := f.(BrokerHeadersFixture)
	if !ok {
		return hs
	}
	added := map[string]bool{}
	for _, k := range bf.HeadersAddedByBroker() {
		added[k] = true
	}
	var out []sdk.Header
	for _, h := range hs {
		if !added[string(h.Key)] {
			out = append(out, h)
		}
	}
	return out
}
