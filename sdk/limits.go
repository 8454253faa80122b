package sdk

import (
	"os"
	"strconv"

	"github.com/lifecycled/lifecycled/sdk/internal/wire"
)

// limitFromEnv is the limit the daemon gave this plugin process.
func limitFromEnv() int {
	n, err := strconv.Atoi(os.Getenv(wire.MaxMessageBytesEnv))
	if err != nil || n < wire.MinMaxMessageBytes || n > wire.MaxMaxMessageBytes {
		return wire.DefaultMaxMessageBytes
	}
	return n
}
