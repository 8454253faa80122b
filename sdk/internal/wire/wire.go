// Package wire holds what both ends of the plugin protocol share and a
// plugin author never calls: the handshake, the message limits and where
// batches are cut, the null of bytes fields. Package sdk (the plugin's end)
// and sdk/host (the daemon's end) import it; it imports neither, so that
// sdk can.
package wire

import (
	"github.com/hashicorp/go-plugin"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	pb "github.com/lifecycled/lifecycled/sdk/proto/lifecycled/plugin/v1"
)

// Handshake is the go-plugin handshake. The cookie only stops a plugin from
// being run by hand by mistake; the checksum and AutoMTLS are the security.
var Handshake = plugin.HandshakeConfig{
	MagicCookieKey:   "LIFECYCLED_PLUGIN",
	MagicCookieValue: "d6f1c2a7-lifecycled-plugin-v1",
}

// MaxMessageBytesEnv names the environment variable through which the daemon
// gives a plugin process the gRPC message limit it uses itself, so that both
// ends of the connection agree.
const MaxMessageBytesEnv = "LIFECYCLED_PLUGIN_MAX_MESSAGE_BYTES"

// DefaultMaxMessageBytes is the gRPC message limit of plugin connections when
// none is configured. gRPC's own default (4 MiB received) is smaller than a
// page of 100 dead letters of 50 KB.
const DefaultMaxMessageBytes = 64 << 20

// MinMaxMessageBytes and MaxMaxMessageBytes bound the configurable limit:
// below gRPC's default nothing is gained, and gRPC sizes are int32.
const (
	MinMaxMessageBytes = 4 << 20
	MaxMaxMessageBytes = 1 << 30
)

// Envelope is what a request or response holds besides its messages (ids,
// batch ids, field tags); batches are cut this much below the limit.
const Envelope = 4 << 10

// WindowSize is the fixed HTTP/2 window of plugin connections, on both
// ends; large enough for a fetch batch of dead letters in flight.
const WindowSize = 16 << 20

// EffectiveLimit is n, or the default for n <= 0.
func EffectiveLimit(n int) int {
	if n <= 0 {
		return DefaultMaxMessageBytes
	}
	return n
}

// SizeInList is what m adds to a repeated field: its bytes, the tag and the
// length prefix.
func SizeInList(m proto.Message) int {
	n := proto.Size(m)
	return 1 + protowire.SizeVarint(uint64(n)) + n
}

// Bytes keeps the difference between null (nil) and empty bytes, which
// proto3 bytes fields cannot tell apart by themselves: a peer built before
// the *_null fields sends none, and its values arrive as empty, as they
// always did. Both ends read keys, values and header values with it.
func Bytes(b []byte, null bool) []byte {
	if null {
		return nil
	}
	if b == nil {
		return []byte{}
	}
	return b
}

// The daemon's end turns what comes off the wire into *sdk.Error values
// that keep the gRPC error as their cause (for errors.Is and for telling a
// dead plugin from an answer), which only package sdk can build: it sets
// these when it is initialised, before sdk/host, which imports it, can run.
var (
	// FromStatus converts an error returned by a gRPC call to an
	// *sdk.Error; nil stays nil.
	FromStatus func(err error) error
	// FromErrorInfo is the *sdk.Error an ErrorInfo detail describes.
	FromErrorInfo func(info *pb.ErrorInfo, msg string) error
)
