package main

import (
	"errors"
	"net"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/lifecycled/lifecycled/sdk"
)

// classify says whether err is worth retrying: the broker unreachable, a
// connection or channel closed, resources short; not bad credentials, a
// vhost the user may not use, or a malformed request.
func classify(err error) error {
	var ae *amqp.Error
	switch {
	case err == nil:
		return nil
	case errors.As(err, &ae):
		switch ae.Code {
		case amqp.AccessRefused, amqp.NotAllowed, amqp.SyntaxError, amqp.CommandInvalid, amqp.NotImplemented:
			return sdk.Permanent(err)
		}
		return sdk.Retryable(err, time.Second)
	case errors.Is(err, amqp.ErrCredentials), errors.Is(err, amqp.ErrVhost), errors.Is(err, amqp.ErrSASL):
		return sdk.Permanent(err)
	}
	var ne net.Error
	if errors.As(err, &ne) || errors.Is(err, amqp.ErrClosed) {
		return sdk.Retryable(err, time.Second)
	}
	return sdk.Retryable(err, time.Second)
}
