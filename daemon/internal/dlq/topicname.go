package dlq

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/lifecycled/lifecycled/daemon/internal/derrors"
)

// MaxTopicLength is the longest topic name the daemon takes, in bytes: a
// Kafka topic has at most 249, an AMQP queue name at most 255, a
// PostgreSQL table name 63.
const MaxTopicLength = 255

// ValidTopic reports whether t can name a topic: a Kafka topic, a queue, a
// table, whatever a source reads dead letters from or sends them to. Each
// source has its own rules and enforces them; the daemon takes any name
// that can be stored, shown and put in a route once URL-escaped
// (orders:dlq, orders/order.created): valid UTF-8 without control
// characters, at most MaxTopicLength bytes, and, read as segments between
// "/", none empty, "." or "..": a path holds no such segment (the API
// refuses them, as ServeMux would redirect to the cleaned path), whether
// or not the "/" is escaped.
func ValidTopic(t string) error {
	switch {
	case t == "":
		return fmt.Errorf("%w: topic must not be empty", derrors.ErrInvalid)
	case hasEmptyOrDotSegment(t):
		return fmt.Errorf("%w: topic %q has an empty, \".\" or \"..\" segment between \"/\"", derrors.ErrInvalid, t)
	case len(t) > MaxTopicLength:
		return fmt.Errorf("%w: topic is %d bytes long (at most %d)", derrors.ErrInvalid, len(t), MaxTopicLength)
	case !utf8.ValidString(t):
		return fmt.Errorf("%w: topic %q is not valid UTF-8", derrors.ErrInvalid, t)
	case strings.IndexFunc(t, unicode.IsControl) >= 0:
		return fmt.Errorf("%w: topic %q contains a control character", derrors.ErrInvalid, t)
	}
	return nil
}

func hasEmptyOrDotSegment(t string) bool {
	for _, seg := range strings.Split(t, "/") {
		if seg == "" || seg == "." || seg == ".." {
			return true
		}
	}
	return false
}
