package main

import (
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/lifecycled/lifecycled/sdk"
)

// clientLogger hands franz-go's warnings and errors to the plugin's log (the
// daemon's, scrubbed of secrets by the SDK): a broker that keeps refusing a
// partition or a group that cannot be joined is said there, as kafka-go's
// error logger said it before. Its info and debug lines are per request.
type clientLogger struct{}

func (clientLogger) Level() kgo.LogLevel { return kgo.LogLevelWarn }

func (clientLogger) Log(level kgo.LogLevel, msg string, keyvals ...any) {
	msg = "kafka client: " + msg
	switch level {
	case kgo.LogLevelError:
		sdk.Logger().Error(msg, keyvals...)
	case kgo.LogLevelWarn:
		sdk.Logger().Warn(msg, keyvals...)
	}
}
