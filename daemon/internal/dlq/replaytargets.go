package dlq

import (
	"fmt"
	"path"
	"strings"

	"github.com/lifecycled/lifecycled/sdk/kafkaconv"
)

// A dead letter's headers are written by whoever can produce to its DLQ
// topic, and the original topic they name is where lifecycled republishes
// it, with its own broker credentials. So a DLQ topic returns messages
// only to its replay targets: [[dlq.topic]] replay_targets, or the
// namespace its own name gives. A message whose header names any other
// topic is stored without an original topic (never claimed, never retried
// by itself or by a plain retry), with the reason, until an operator sends
// it somewhere explicitly. The source's own topic mapping is the
// operator's configuration and is not second-guessed.

// ReplayTargetRefused is in the reason (last_error) of a message whose
// header named a topic outside its DLQ topic's replay targets.
const ReplayTargetRefused = "outside the replay targets"

// markerWidth is how many name segments, from segs[i], mark a dead-letter
// topic: ours (orders.dlq.v1), Spring's (orders-dlt, orders.DLT) and the
// spelled-out ones (deadletter, dead.letter); 0 when segs[i] marks none.
func markerWidth(segs []segment, i int) int {
	switch strings.ToLower(segs[i].text) {
	case "dlq", "dlt", "deadletter", "deadletters":
		return 1
	case "dead": // "dead" alone is a word, not a marker
		if i+1 < len(segs) && strings.HasPrefix(strings.ToLower(segs[i+1].text), "letter") {
			return 2
		}
	}
	return 0
}

// segment is a part of a topic's name between separators (. - _).
type segment struct {
	text  string
	start int // its offset in the name
}

// DefaultReplayTargets derives a DLQ topic's replay targets from its name:
// the namespace before the dead-letter marker, and everything in it with
// the same separator ("orders.dlq.v1" -> "orders", "orders.*";
// "orders-dlt" -> "orders", "orders-*"); with the marker first, the
// segment after it ("dlq.orders" -> "orders", "orders.*"). A name without
// a marker gives none: every header-named origin is refused until
// [[dlq.topic]] replay_targets says where its messages may go.
func DefaultReplayTargets(dlqTopic string) []string {
	var segs []segment
	start := 0
	for i := 0; i <= len(dlqTopic); i++ {
		if i == len(dlqTopic) || strings.IndexByte(".-_", dlqTopic[i]) >= 0 {
			segs = append(segs, segment{dlqTopic[start:i], start})
			start = i + 1
		}
	}
	for i, s := range segs {
		width := markerWidth(segs, i)
		if width == 0 {
			continue
		}
		var base string
		var sep byte
		if i > 0 {
			base, sep = dlqTopic[:s.start-1], dlqTopic[s.start-1]
		} else if next := i + width; next < len(segs) {
			base, sep = segs[next].text, dlqTopic[segs[next].start-1]
		}
		if base == "" || strings.ContainsAny(base, "*?[\\") {
			return nil
		}
		return []string{base, base + string(sep) + "*"}
	}
	return nil
}

// ReplayTargetsOf is the replay targets of a DLQ topic under a policy.
func ReplayTargetsOf(p Policy, dlqTopic string) []string {
	if t := p.For(dlqTopic).ReplayTargets; t != nil {
		return t
	}
	return DefaultReplayTargets(dlqTopic)
}

// IsReplayTarget reports whether topic matches one of the globs.
func IsReplayTarget(targets []string, topic string) bool {
	for _, g := range targets {
		if ok, _ := path.Match(g, topic); ok {
			return true
		}
	}
	return false
}

// RefuseOutsideTargets takes the original topic from a message whose
// source read it from the message (not from its own configuration) and
// which is outside targets, and says why; it reports whether it did.
func RefuseOutsideTargets(in *Incoming, targets []string) bool {
	if in.Origin.Configured || in.OriginalTopic == "" || IsReplayTarget(targets, in.OriginalTopic) {
		return false
	}
	in.LastError = fmt.Sprintf("%s%s names %s, %s of %s (%s): it is sent only where an operator replays it to (dlq replay ID --topic TOPIC)",
		NoOriginalTopicPrefix, namedBy(in.Origin.From), in.OriginalTopic, ReplayTargetRefused, in.Position.Topic, describeTargets(targets))
	in.OriginalTopic = ""
	return true
}

// namedBy is what named an original topic, for a reason.
func namedBy(from string) string {
	if from == "" {
		return "the message"
	}
	return from
}

// outsideTargets says why a stored message may not be sent to its original
// topic ("" when it may): the message named the topic, and the topic is
// not among its DLQ topic's targets now.
func outsideTargets(m *Message, targets []string) string {
	if m.OriginalTopic == "" || IsReplayTarget(targets, m.OriginalTopic) {
		return ""
	}
	o := m.Origin
	if o.From == "" {
		o = legacyOrigin(m)
	}
	if o.Configured {
		return "" // the source's mapping chose it
	}
	return fmt.Sprintf("%s names %s, %s of %s (%s): not sent; replay it to a topic explicitly (dlq replay ID --topic TOPIC)",
		namedBy(o.From), m.OriginalTopic, ReplayTargetRefused, m.Position.Topic, describeTargets(targets))
}

// legacyOrigin is the origin of a message stored before sources reported
// it: a Kafka message, whose original topic the daemon read from its
// headers by the conventions (kafkaconv), else from the source's mapping.
func legacyOrigin(m *Message) Origin {
	o := kafkaconv.Origin(sdkHeaders(m.Headers), "")
	switch {
	case o.DestinationProblem != "":
		// Stored before such names were refused: the topic is the name cut.
		return Origin{From: o.DestinationFrom}
	case o.Destination == m.OriginalTopic:
		return Origin{From: o.DestinationFrom}
	}
	return Origin{Configured: true, From: "the source's topic mapping"}
}

func describeTargets(targets []string) string {
	if len(targets) == 0 {
		return "none: its name follows no dead-letter naming convention; set [[dlq.topic]] replay_targets"
	}
	return strings.Join(targets, ", ")
}
