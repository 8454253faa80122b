package main

import (
	"fmt"
	"net/url"
	"strings"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/lifecycled/lifecycled/sdk"
)

// A destination is where Republish sends a message: "<exchange>/<routing
// key>", the exchange's name path-escaped (a '/' in it is %2F); for the
// default exchange, which routes to the queue of that name, the bare queue
// name, or "/<queue>" when the name holds a '/'.
func destination(exchange, routingKey string) string {
	if exchange == "" {
		if strings.Contains(routingKey, "/") {
			return "/" + routingKey
		}
		return routingKey
	}
	return url.PathEscape(exchange) + "/" + routingKey
}

func parseDestination(d string) (exchange, routingKey string, err error) {
	e, key, ok := strings.Cut(d, "/")
	if !ok {
		return "", d, nil
	}
	exchange, err = url.PathUnescape(e)
	if err != nil {
		return "", "", fmt.Errorf("destination %q: want <exchange>/<routing key> (the exchange's name path-escaped), a queue name, or /<queue name>", d)
	}
	return exchange, key, nil
}

// Headers of Spring AMQP's RepublishMessageRecoverer, which republishes a
// failed message to an error exchange instead of rejecting it.
const (
	springMessage    = "x-exception-message"
	springStack      = "x-exception-stacktrace"
	springExchange   = "x-original-exchange"
	springRoutingKey = "x-original-routingKey"
)

// originOf reads where a message failed from its headers: x-death, which
// RabbitMQ writes when it dead-letters a message (rejected, expired, over
// a queue's length or delivery limit), newest first, and Spring AMQP's
// recoverer headers. The first death is where it was published to
// originally (a retry goes there, through whatever delay queue it went
// through then); the newest is the failure that brought it here (the
// reason, and how often it failed so: a retry loop's expiries in a wait
// queue are not failures).
func originOf(h amqp.Table) sdk.Origin {
	var o sdk.Origin
	if msg, ok := h[springMessage].(string); ok {
		o.ErrorMessage = msg
	}
	if ex, ok := h[springExchange].(string); ok {
		key, _ := h[springRoutingKey].(string)
		o.Destination, o.DestinationFrom = destination(ex, key), "the headers "+springExchange+" and "+springRoutingKey
		if trace, ok := h[springStack].(string); ok {
			o.ErrorClass = rootCause(trace)
		}
	}
	deaths, _ := h["x-death"].([]any)
	firstQueue, _ := h["x-first-death-queue"].(string)
	firstReason, _ := h["x-first-death-reason"].(string)
	var first, last amqp.Table
	for _, d := range deaths {
		t, ok := d.(amqp.Table)
		if !ok {
			continue
		}
		if last == nil {
			last = t
			if n, ok := t["count"].(int64); ok && n > 0 {
				o.Attempts = int(n)
			}
		}
		if at, ok := t["time"].(time.Time); ok && !at.IsZero() && (o.FirstFailedAt.IsZero() || at.Before(o.FirstFailedAt)) {
			o.FirstFailedAt = at
		}
		q, _ := t["queue"].(string)
		r, _ := t["reason"].(string)
		if first == nil || (q == firstQueue && r == firstReason) {
			first = t
		}
	}
	if len(deaths) > 0 && first == nil {
		o.DestinationProblem = "x-death holds no entry RabbitMQ could have written"
	}
	if first != nil && o.Destination == "" {
		ex, _ := first["exchange"].(string)
		keys, _ := first["routing-keys"].([]any)
		key := ""
		if len(keys) > 0 {
			key, _ = keys[0].(string)
		}
		o.DestinationFrom = "x-death"
		if ex == "" && key == "" {
			o.DestinationProblem = "x-death names no exchange and no routing key"
		} else {
			o.Destination = destination(ex, key)
		}
	}
	var reason, queue string
	if last != nil {
		reason, _ = last["reason"].(string)
		queue, _ = last["queue"].(string)
	}
	if o.ErrorClass == "" {
		o.ErrorClass = reason
	}
	if o.ErrorMessage == "" && reason != "" {
		o.ErrorMessage = fmt.Sprintf("dead-lettered from queue %s: %s", queue, reason)
	}
	return o
}

// rootCause is the exception class of a Java stack trace's last "Caused
// by:" (Spring wraps the listener's exception in
// ListenerExecutionFailedException), else of its first line.
func rootCause(trace string) string {
	line, _, _ := strings.Cut(trace, "\n")
	if i := strings.LastIndex(trace, "Caused by: "); i >= 0 {
		line, _, _ = strings.Cut(trace[i+len("Caused by: "):], "\n")
	}
	class, _, _ := strings.Cut(line, ":")
	return strings.TrimSpace(class)
}
