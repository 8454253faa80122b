package sdk

import (
	"os"
	"strconv"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
)

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

// envelope is what a request or response holds besides its messages (ids,
// batch ids, field tags); batches are cut this much below the limit.
const envelope = 4 << 10

// effectiveLimit is n, or the default for n <= 0.
func effectiveLimit(n int) int {
	if n <= 0 {
		return DefaultMaxMessageBytes
	}
	return n
}

// limitFromEnv is the limit the daemon gave this plugin process.
func limitFromEnv() int {
	n, err := strconv.Atoi(os.Getenv(MaxMessageBytesEnv))
	if err != nil || n < MinMaxMessageBytes || n > MaxMaxMessageBytes {
		return DefaultMaxMessageBytes
	}
	return n
}

// sizeInList is what m adds to a repeated field: its bytes, the tag and the
// length prefix.
func sizeInList(m proto.Message) int {
	n := proto.Size(m)
	return 1 + protowire.SizeVarint(uint64(n)) + n
}
